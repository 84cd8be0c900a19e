"""The bench's peers: what a data engineer would pick instead of this project for exactly-once Kafka to
Kafka, each doing the shop's transform over the same purchases on the same broker."""
