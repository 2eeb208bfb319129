"""The `tasq` subcommands, one module each; every module exposes `register(subparsers)`.

`controller.cli` lists them; a command appears in `--help` only once its module exists.
"""
