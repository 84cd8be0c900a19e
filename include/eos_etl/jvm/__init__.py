"""The JVMs the product starts or asks Spark to start: their options and their class-data sharing archives
(trained once, shared by every broker, Spark driver and executor of this machine)."""
