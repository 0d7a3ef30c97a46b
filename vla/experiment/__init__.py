"""Named experiments: a recipe per result (``configs/experiment/<name>.yaml``), one runner (``vla-experiment``),
a module per kind, and the test sets' use ledger (docs/experiments/README.md). Nothing else in the project
imports this package: it sits above everything, like the CLIs."""
