"""Tests of the PTO virtual ISA and its text assembly (pypto.isa)."""
