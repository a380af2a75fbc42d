"""Readers for the data formats users have (IOB/CoNLL, BRAT standoff, TSV/JSONL, Hugging Face datasets)."""
