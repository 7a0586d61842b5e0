"""The edges of the app: the command line (cli: argparse, printing, exit codes), every
setting a user can give, declared once with its flag, link key and label (settings), which the
CLI and the pages both read, and the Validation table, whose rows are command lines (validation).
The domain packages never import this one.
"""
