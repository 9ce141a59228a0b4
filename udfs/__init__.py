"""Non-deterministic pandas UDFs that draw randomness on the executors (noise, shuffle keys)."""
