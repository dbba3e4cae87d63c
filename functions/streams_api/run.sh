#!/bin/sh
# The Lambda Web Adapter (its layer, AWS_LAMBDA_EXEC_WRAPPER=/opt/bootstrap) runs this as the
# function's "handler": the streams WSGI app in a plain HTTP server on AWS_LWA_PORT, whose answers
# the adapter streams back (AWS_LWA_INVOKE_MODE=response_stream). /opt/python: the shared layer.
PYTHONPATH="/opt/python:${LAMBDA_TASK_ROOT}:${PYTHONPATH}" exec python3 -m functions.streams_api.serve
