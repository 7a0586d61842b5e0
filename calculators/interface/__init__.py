"""The edges of the app: the command line (cli: argparse, printing, exit codes) and every
setting a user can give, declared once with its flag, link key and label (settings), which the
CLI and the pages both read. The domain packages never import this one.
"""
