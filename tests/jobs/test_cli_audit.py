"""``fragrelease audit --epsilon`` takes ε as exact text, like every other command (issue 25)."""
from fragrelease.jobs.cli import main


def test_audit_epsilon_is_exact_text(capsys):
    assert main(["audit", "--epsilon", "1/2", "--runs", "1000", "--k", "4", "--mechanism", "dp-ir"]) == 0
    out = capsys.readouterr().out
    assert "1/2" in out  # shown exactly, not as a rounded float (0.5)


def test_audit_refuses_a_bad_epsilon_with_one_line(capsys):
    assert main(["audit", "--epsilon", "1", "--epsilon", "0.1x", "--runs", "200"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--epsilon" in err[0] and "0.1x" in err[0]
