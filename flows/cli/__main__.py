"""`python -m flows.cli`: the `frame` command."""

from flows.cli import main

main()
