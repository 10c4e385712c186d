"""An S3-compatible server on 127.0.0.1 for the object-store tests.

Usage: s3_server.py PORT BUCKET...

Starts moto's server on 127.0.0.1:PORT, creates the buckets, prints
"ready" and serves until its standard input closes, so that it ends with
the test process that started it, however that ends.
"""

import sys

import boto3
from moto.server import ThreadedMotoServer


def main() -> None:
    port = int(sys.argv[1])
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    s3 = boto3.client(
        "s3",
        endpoint_url=f"http://127.0.0.1:{port}",
        aws_access_key_id="test",
        aws_secret_access_key="test",
        region_name="us-east-1",
    )
    for bucket in sys.argv[2:]:
        s3.create_bucket(Bucket=bucket)
    print("ready", flush=True)
    sys.stdin.read()
    server.stop()


if __name__ == "__main__":
    main()
