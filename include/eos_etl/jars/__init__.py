"""The jars the product fetches from Maven Central (Kafka's broker and tools, Spark's Kafka connector), their
pinned versions, and the fetch. Read by the Spark sessions (the connector), Kafka's Java tools, the embedded
stack and the Docker image's build."""
