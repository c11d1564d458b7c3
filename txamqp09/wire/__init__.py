"""Everything about bytes and nothing about roles: codecs, frames, versions."""
