# keepgoing worker image for group wf-agent
# image spec 1c9b13807303cbdc9c4a5aabc349beb8327af57ec7737305d8fe913d46ab68c9
FROM python:3.12-slim
ENV PYTHONUNBUFFERED=1 PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1
RUN apt-get update && apt-get install -y --no-install-recommends curl git && rm -rf /var/lib/apt/lists/*
RUN python -m pip install 'keepgoing[postgres]==0.1.0' numpy
RUN python -m pip install uv
RUN uv pip install --system orjson
RUN echo built > /built.txt
ENV A="1" MODE="say \"hi\" \$HOME"
COPY ["files/b5bc1ffd90912fb18bef6e7d80909192c7a6492896320156d67fbaf104c6544a", "/etc/agent/cfg.toml"]
COPY ["dirs/35de301482254f871f279d85496ac7abcf5ac5ad882e62a1dd1a8c4d2a2a2571/", "/opt/prompts/"]
WORKDIR /srv
RUN useradd --create-home --uid 10001 keepgoing
COPY ["source/agent.py", "/app/agent.py"]
USER 10001
ENTRYPOINT ["keepgoing", "worker", "/app/agent.py", "--queue", "workflows.wf-agent", "--concurrency", "16", "--shutdown-grace", "10"]
