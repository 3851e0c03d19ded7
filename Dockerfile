# FerryMQ in one process (`ferrymq standalone`: the name server and a broker), run as a non-root user.
#
#   docker build -t ferrymq .
#   docker run -d -p 9876:9876 -p 10911:10911 -v ferrymq-data:/var/lib/ferrymq \
#       -e FERRYMQ_brokerIP1=<an address clients reach this host by> ferrymq
#
# Configuration, a later source overriding an earlier one (docs/testing.md):
#   1. docker/defaults.conf, baked in: the store and the name server's KV config in the volume
#   2. a mounted /etc/ferrymq/broker.conf (Apache's key=value format)
#   3. FERRYMQ_<key>=<value> environment variables, e.g. FERRYMQ_brokerIP1, FERRYMQ_listenPort
# Arguments after the image name go to `ferrymq standalone` (e.g. --log-level DEBUG).
#
# The base image is any Debian-like one with Python >= 3.11 (python3 -m venv and useradd available).
# With a C compiler in it the C parts and the Cython hot path are compiled; without one (the -slim
# images) the same code runs as Python. --build-arg FERRYMQ_NO_CYTHON=1 skips the Cython step.
ARG BASE=python:3.11-slim
FROM ${BASE}

ARG FERRYMQ_NO_CYTHON=

RUN useradd --system --uid 10001 --user-group --home-dir /var/lib/ferrymq --shell /usr/sbin/nologin ferrymq \
 && install -d -o ferrymq -g ferrymq /var/lib/ferrymq

# The dependencies, read from pyproject.toml: this layer is rebuilt only when that file changes.
COPY pyproject.toml /tmp/ferrymq-deps/
RUN python3 -m venv /opt/ferrymq \
 && python3 -c "import tomllib; p = tomllib.load(open('/tmp/ferrymq-deps/pyproject.toml', 'rb')); \
print(*p['project']['dependencies'], *p['build-system']['requires'], sep='\n')" > /tmp/ferrymq-deps/requirements.txt \
 && /opt/ferrymq/bin/pip install --no-cache-dir --disable-pip-version-check -r /tmp/ferrymq-deps/requirements.txt \
 && rm -rf /tmp/ferrymq-deps

COPY . /tmp/ferrymq-src
# Without a C compiler Cython's output could not be compiled: skip generating it.
RUN if ! command -v cc >/dev/null; then FERRYMQ_NO_CYTHON=1; fi \
 && FERRYMQ_NO_CYTHON="$FERRYMQ_NO_CYTHON" /opt/ferrymq/bin/pip install --no-cache-dir --disable-pip-version-check \
        --no-deps --no-build-isolation /tmp/ferrymq-src \
 && install -D -m 0644 /tmp/ferrymq-src/docker/defaults.conf /opt/ferrymq/etc/defaults.conf \
 && install -D -m 0755 /tmp/ferrymq-src/docker/entrypoint.sh /opt/ferrymq/bin/ferrymq-container \
 && rm -rf /tmp/ferrymq-src

ENV PATH=/opt/ferrymq/bin:$PATH
USER 10001:10001
WORKDIR /var/lib/ferrymq
VOLUME /var/lib/ferrymq
# name server, broker, the broker's fast (VIP) channel, the HTTP gateway (httpListenPort)
EXPOSE 9876 10911 10909 8080
HEALTHCHECK --interval=5s --timeout=10s --start-period=30s --retries=3 CMD ["ferrymq-container", "health"]
ENTRYPOINT ["ferrymq-container"]
