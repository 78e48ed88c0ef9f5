# keepgoing worker image for group wf-agent-1a2b3c4d
# image spec d94af85d24c01428939156173941d042281b2ff86b9ae97115ba792adc1fcbb0
FROM python:3.11-slim
ENV PYTHONUNBUFFERED=1 PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1
RUN python -m pip install numpy
RUN python -m pip install 'httpx>=0.27' 'keepgoing[postgres]==0.1.0'
RUN useradd --create-home --uid 10001 keepgoing
COPY ["source/agent.py", "/app/agent.py"]
WORKDIR /app
USER 10001
ENTRYPOINT ["keepgoing", "worker", "/app/agent.py", "--queue", "workflows.wf-agent-1a2b3c4d", "--concurrency", "16", "--shutdown-grace", "10"]
