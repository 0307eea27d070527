"""One module per question; ``python -m bench`` lists them (bench/README.md: how to add one)."""
