from loadproof.cli import main

main()
