"""The simulator's predictor: what a scenario's run would measure on a modeled engine, and the model fitted to
measured runs (docs/simulator.md). It sits above the scenarios, whose options and formulas it uses; the
simulated engine it runs is `loadproof.sim`, low in the layers.

- `base`: a scenario's `Predictor`, which its catalog entry names (`predict`), with the claims a contract of
  it compares (`contract`) and what its runs give the fit (`calibrate`); `capacity`, `prefill`, `load`,
  `replay`, `throughput`: loadproof's own scenarios' parts;
- `whatif`: `plan --simulate NAME` and `sim predict-NAME` below the command line; `deployment`: a deployment
  profile on a sim profile's step costs; `virtual`: the scheduler on a virtual clock;
- `ranges`, `contract`: each figure's range over the profile's open assumptions, and a prediction written as
  a contract (`rundir.prediction`);
- `points`, `calibrate`, `published`, `calibration`, `grid`: `loadproof sim calibrate` (the points a run gives,
  the fit, a published-figures file, the command's inputs and output, the grid of capacity runs in process).
"""
