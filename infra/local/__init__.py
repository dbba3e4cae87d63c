"""`dovecote dev`: the whole service on one machine, over moto, with API Gateway emulated."""
