"""The protocol's vocabulary, the floor every other room of protocol/ stands on: what a sum is
(spec), the stages and steps of a round, the messages every collective shares, how a session
is opened and its steps numbered (session), and where a scripted dropout strikes (crash_point).
Imports nothing else of the protocol (tests/test_layers.py)."""
