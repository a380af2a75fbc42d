"""One module per `biobench` subcommand (see biobench.cli)."""
