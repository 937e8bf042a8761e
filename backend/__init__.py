"""The Spark side of Dipper: the embedded Spark session and Thrift Server, the warehouse it serves, clients."""
