"""Deployment (CDK), the route table, and the local runtime (`dovecote dev`)."""
