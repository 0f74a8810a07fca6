"""What a user typed or a server said is printed as it is: never read as rich markup (`[x]`, `[bold]`) or as
an emoji code (`:100:`), wherever the console prints it (issue #37)."""

from __future__ import annotations

import subprocess
import sys

from loadproof.cli import common, ui

EMOJI = "\N{HUNDRED POINTS SYMBOL}"  # what rich makes of `:100:`
TYPED = "--input-tokens uniform:100:200 --model m[x] [bold]kept[/bold]"


def test_an_option_echoed_in_an_error_line_is_printed_as_typed():
    argv = [sys.executable, "-m", "loadproof", *"run load --url http://127.0.0.1:9 --rate 1 -n 2".split()]
    proc = subprocess.run([*argv, "--input-tokens", "uniform:100:[x]"], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.startswith("error: --input-tokens uniform:100:[x]: "), proc.stderr
    assert EMOJI not in proc.stderr


def test_status_and_result_lines_print_user_text_as_typed():
    with ui.err.capture() as err:
        common.console.say(TYPED)
    with ui.out.capture() as out:
        common.console.result(TYPED)
    assert err.get() == TYPED + "\n"
    assert out.get() == TYPED + "\n"


def test_a_tables_title_header_and_cells_print_user_text_as_typed():
    with ui.out.capture() as out:
        ui.table("load [bold]m[/bold] :100:", ["claim [x]", "value"], [["m[x]:100:", "[1]"]])
    text = out.get()
    assert "load [bold]m[/bold] :100:" in text
    assert "claim [x]" in text and "m[x]:100:" in text and "[1]" in text
    assert EMOJI not in text
