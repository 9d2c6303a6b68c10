"""One module per ``commscope`` subcommand, each with ``register(subparsers)`` and ``run(args)``."""
