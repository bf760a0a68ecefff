"""The end-to-end proofs run real engines, servers and trainers: every test here is slow."""
