"""Running the CLI in-process, shared by the CLI tests."""

from calculators.interface.cli import main


def run_cli(capsys, *argv: str) -> tuple[int, str, str]:
    """(exit code, stdout, stderr) of `python -m calculators *argv`."""
    code = main(list(argv))
    captured = capsys.readouterr()
    return code, captured.out, captured.err
