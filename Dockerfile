# KAI Portal: one image for web (gunicorn), worker and beat (celery).
FROM python:3.11-slim AS base

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1

WORKDIR /app

# Dependencies first, so code changes do not reinstall them.
COPY pyproject.toml ./
RUN mkdir -p kai_portal scheduler \
    && touch kai_portal/__init__.py scheduler/__init__.py \
    && pip install . \
    && pip uninstall -y kai-portal

COPY . .
RUN pip install --no-deps . \
    && SECRET_KEY=collectstatic-only DATABASE_URL=sqlite:////tmp/build.sqlite3 \
       python manage.py collectstatic --noinput \
    && useradd --system --uid 10001 --home-dir /app kai \
    && mkdir -p /app/var && chown kai /app/var

USER kai
EXPOSE 8000
CMD ["gunicorn", "kai_portal.wsgi:application", "--bind", "0.0.0.0:8000", "--workers", "3", "--access-logfile", "-"]
