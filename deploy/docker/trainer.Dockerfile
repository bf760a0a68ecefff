# The example training job: exporters/examples/train_mnist_like.py (a small PyTorch MLP on
# scikit-learn's digits) exporting its loss with policyd-exporters on :9108.
# Build from the repository root:  docker build -f deploy/docker/trainer.Dockerfile .
FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1 PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1
# CPU wheels of PyTorch (no CUDA: a few hundred MB instead of several GB).
RUN pip install --index-url https://download.pytorch.org/whl/cpu torch \
 && pip install scikit-learn
WORKDIR /src
COPY exporters ./exporters
RUN pip install ./exporters && mkdir -p /app && cp exporters/examples/train_mnist_like.py /app/ \
 && rm -rf /src
RUN useradd --system --uid 10002 --create-home trainer && mkdir -p /checkpoints \
 && chown trainer /checkpoints
USER trainer
WORKDIR /app
EXPOSE 9108
ENTRYPOINT ["python", "/app/train_mnist_like.py", "--addr", "0.0.0.0", "--port", "9108", \
            "--checkpoint-dir", "/checkpoints"]
