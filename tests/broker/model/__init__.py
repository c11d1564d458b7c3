"""Tests of txamqp09.broker.model without sockets: declarations, routing,
consumers and acks, the queue features on a Clock, streams, and the store link."""
