"""Queue and message features: TTL, expiry, dead-lettering, length limits,
priorities, alternate exchanges, single active consumer, consumer priorities."""
