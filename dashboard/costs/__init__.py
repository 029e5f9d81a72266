"""Spend: the cost rules, days, periods, the per-day rollup, headlines, costly sessions."""
