"""Confluent's serializers on the other side of rivus's tests (Avro, and JSON Schema with
the `json-` modes, which take and give the records as they are).

  confluent.py produce BOOTSTRAP REGISTRY TOPIC SCHEMA RECORDS   JSON lines → Avro (AvroSerializer)
  confluent.py consume BOOTSTRAP REGISTRY TOPIC N                 N Avro records → JSON lines on stdout
  confluent.py encode - REGISTRY SUBJECT-TOPIC SCHEMA RECORDS     JSON lines → base64 payload lines
  confluent.py decode - REGISTRY SUBJECT-TOPIC                    base64 payload lines (stdin) → JSON
  confluent.py json-produce BOOTSTRAP REGISTRY TOPIC SCHEMA RECORDS   (JSONSerializer)
  confluent.py json-consume BOOTSTRAP REGISTRY TOPIC N                (JSONDeserializer)

Records are JSON lines in rivus's mapping of Avro (decimal as text, timestamps as RFC 3339,
dates as YYYY-MM-DD, bytes as base64, uuid as text); this script turns them into the Python
values Confluent's serializer takes (Decimal, datetime, date, UUID, bytes) and back, so that
both directions compare field for field. `consume` prints `{"key": ..., "value": ...}`.
"""
import base64
import datetime
import decimal
import json
import sys
import time
import uuid

from confluent_kafka import Consumer, Producer
from confluent_kafka.schema_registry import SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroDeserializer, AvroSerializer
from confluent_kafka.schema_registry.json_schema import JSONDeserializer, JSONSerializer
from confluent_kafka.serialization import MessageField, SerializationContext


def to_python(rec):
    out = dict(rec)
    if "amount" in out:
        out["amount"] = decimal.Decimal(out["amount"])
    if "placed" in out:
        out["placed"] = datetime.datetime.fromisoformat(out["placed"].replace("Z", "+00:00"))
    if "day" in out:
        out["day"] = datetime.date.fromisoformat(out["day"])
    if "ref" in out:
        out["ref"] = uuid.UUID(out["ref"])
    if "blob" in out:
        out["blob"] = base64.b64decode(out["blob"])
    return out


def to_json(obj):
    if isinstance(obj, dict):
        return {k: to_json(v) for k, v in obj.items()}
    if isinstance(obj, list):
        return [to_json(v) for v in obj]
    if isinstance(obj, decimal.Decimal):
        return str(obj)
    if isinstance(obj, datetime.datetime):
        utc = obj.astimezone(datetime.timezone.utc)
        return utc.strftime("%Y-%m-%dT%H:%M:%S.") + "%03dZ" % (utc.microsecond // 1000)
    if isinstance(obj, datetime.date):
        return obj.isoformat()
    if isinstance(obj, uuid.UUID):
        return str(obj)
    if isinstance(obj, bytes):
        return base64.b64encode(obj).decode()
    return obj


def main():
    mode, bootstrap, registry, topic = sys.argv[1:5]
    client = SchemaRegistryClient({"url": registry})
    if mode in ("produce", "json-produce"):
        schema = open(sys.argv[5]).read()
        if mode == "produce":
            ser, convert = AvroSerializer(client, schema), to_python
        else:
            ser, convert = JSONSerializer(schema, client), lambda r: r
        p = Producer({"bootstrap.servers": bootstrap})
        ctx = SerializationContext(topic, MessageField.VALUE)
        for line in open(sys.argv[6]):
            if line.strip():
                p.produce(topic, value=ser(convert(json.loads(line)), ctx))
        p.flush(30)
    elif mode in ("consume", "json-consume"):
        n = int(sys.argv[5])
        if mode == "consume":
            de = AvroDeserializer(client)
        else:
            de = JSONDeserializer(None, schema_registry_client=client)
        c = Consumer({
            "bootstrap.servers": bootstrap,
            "group.id": "confluent-" + topic,
            "auto.offset.reset": "earliest",
            "isolation.level": "read_committed",
        })
        c.subscribe([topic])
        got, deadline = 0, time.time() + 60
        while got < n and time.time() < deadline:
            m = c.poll(0.5)
            if m is None or m.error():
                continue
            key = m.key()
            if key is not None:
                key = de(key, SerializationContext(topic, MessageField.KEY))
            value = de(m.value(), SerializationContext(topic, MessageField.VALUE))
            print(json.dumps({"key": to_json(key), "value": to_json(value)}), flush=True)
            got += 1
        c.close()
        if got < n:
            sys.exit(f"only {got} of {n} records arrived")
    elif mode == "encode":
        ser = AvroSerializer(client, open(sys.argv[5]).read())
        ctx = SerializationContext(topic, MessageField.VALUE)
        for line in open(sys.argv[6]):
            if line.strip():
                print(base64.b64encode(ser(to_python(json.loads(line)), ctx)).decode())
    elif mode == "decode":
        de = AvroDeserializer(client)
        ctx = SerializationContext(topic, MessageField.VALUE)
        for line in sys.stdin:
            if line.strip():
                print(json.dumps(to_json(de(base64.b64decode(line), ctx))), flush=True)
    else:
        sys.exit(f"unknown mode {mode}")


main()
