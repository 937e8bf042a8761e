# Dipper image: Python 3.11, a Java 17 runtime and Dipper, entry point server.py.
# A plain mirror of the Makefile's install steps (tests/test_packaging.py keeps the two in step).
#
#   docker build -t dipper .
#   docker run -p 10000:10000 -v $PWD/data/warehouse:/data/warehouse -v $PWD/data/stats:/data/stats \
#              -v $PWD/data/logs:/data/logs dipper
FROM python:3.11-slim-bookworm

RUN apt-get update \
    && apt-get install -y --no-install-recommends openjdk-17-jre-headless procps make \
    && rm -rf /var/lib/apt/lists/*

WORKDIR /opt/dipper
COPY pyproject.toml README.md Makefile server.py ./
COPY conf ./conf
COPY dipper ./dipper
COPY backend ./backend
COPY bench ./bench
COPY layout ./layout
COPY proxy ./proxy
COPY rewriter ./rewriter
COPY stats ./stats
RUN python -m pip install --no-cache-dir --upgrade pip \
    && python -m pip install --no-cache-dir -e '.[bench]'

# Warehouse (catalog tables), catalog (metastore), statistics store, logs: mount them to keep data across
# containers.
ENV DIPPER_PATHS_RAW=/data/raw \
    DIPPER_PATHS_WAREHOUSE=/data/warehouse \
    DIPPER_PATHS_METASTORE=/data/metastore \
    DIPPER_PATHS_STATS=/data/stats \
    DIPPER_PATHS_LOGS=/data/logs \
    DIPPER_PROXY_DECISION_LOG=/data/logs/decisions.jsonl \
    DIPPER_PROXY_HOST=0.0.0.0
VOLUME ["/data/warehouse", "/data/metastore", "/data/stats", "/data/logs"]
# The proxy, where clients connect, and its Prometheus metrics (proxy.metrics_port). The embedded Spark Thrift
# Server stays private on 127.0.0.1:10001.
EXPOSE 10000 10003

ENTRYPOINT ["python", "server.py"]
