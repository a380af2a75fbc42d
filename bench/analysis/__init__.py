"""The paper's analyses: CKA, layer transplants, linear probes, needle in a haystack."""
