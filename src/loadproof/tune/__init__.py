"""`loadproof tune`: a grid of a profile's settings predicted on the simulator, the promising points measured
for real under the supervisor, the Pareto front (`tuning` orchestrates; `grid`, `journal`, `measure`,
`pareto`)."""
