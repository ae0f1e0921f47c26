# The runtime image: `flatjob runtime` for a namespace's jobs (or one job's). Its tag must equal
# the compiler's version: the runtime reads the record's spec and annotations as that version
# wrote them, and refuses records compiled by another.
FROM python:3.11-slim AS build
WORKDIR /src
COPY pyproject.toml README.md ./
COPY compiler compiler
COPY runtime runtime
COPY schemas schemas
RUN pip wheel --no-cache-dir --wheel-dir /wheels '.[runtime]'

FROM python:3.11-slim
# The Argo CD sidecar runs in a repository's checkout: never import a module from there.
ENV PYTHONSAFEPATH=1
COPY --from=build /wheels /wheels
RUN pip install --no-cache-dir --no-index /wheels/*.whl && rm -rf /wheels
USER 65532:65532
EXPOSE 8080
ENTRYPOINT ["flatjob"]
CMD ["runtime", "--help"]
