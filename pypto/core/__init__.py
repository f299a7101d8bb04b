"""Shared ground of every level: errors, source locations, dispatch and tolerances."""
