"""Meta-evaluation: how well each metric agrees with human judgement (paper 000 Tables 2-5)."""
