"""Confluent's serializers on the other side of rivus's tests (Avro, and JSON Schema with
the `json-` modes, which take and give the records as they are).

  confluent.py produce BOOTSTRAP REGISTRY TOPIC SCHEMA RECORDS   JSON lines → Avro (AvroSerializer)
  confluent.py consume BOOTSTRAP REGISTRY TOPIC N                 N Avro records → JSON lines on stdout
  confluent.py encode - REGISTRY SUBJECT-TOPIC SCHEMA RECORDS     JSON lines → base64 payload lines
  confluent.py decode - REGISTRY SUBJECT-TOPIC                    base64 payload lines (stdin) → JSON
  confluent.py json-produce BOOTSTRAP REGISTRY TOPIC SCHEMA RECORDS   (JSONSerializer)
  confluent.py json-consume BOOTSTRAP REGISTRY TOPIC N                (JSONDeserializer)
  confluent.py proto-produce BOOTSTRAP REGISTRY TOPIC PROTO RECORDS   (ProtobufSerializer)
  confluent.py proto-consume BOOTSTRAP REGISTRY TOPIC N PROTO         (ProtobufDeserializer)

Protobuf message classes are generated from the `.proto` file at run time (grpcio-tools'
protoc); records are in the proto3 JSON mapping with field names as in the file, every
field present and 64-bit integers as numbers.

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


def proto_class(proto_path):
    """The first message class of a `.proto` file, generated into a temporary directory with
    the classes of every `.proto` file beside it (the files it may import)."""
    import importlib
    import importlib.resources
    import os
    import tempfile

    from grpc_tools import protoc

    out = tempfile.mkdtemp()
    folder, name = os.path.split(os.path.abspath(proto_path))
    include = str(importlib.resources.files("grpc_tools") / "_proto")
    siblings = sorted(f for f in os.listdir(folder) if f.endswith(".proto"))
    if protoc.main(["protoc", f"-I{folder}", f"-I{include}", f"--python_out={out}", *siblings]) != 0:
        sys.exit(f"protoc failed on {proto_path}")
    sys.path.insert(0, out)
    module = importlib.import_module(name[: -len(".proto")] + "_pb2")
    return getattr(module, next(iter(module.DESCRIPTOR.message_types_by_name)))


def proto_to_json(msg):
    """A message in the proto3 JSON mapping, 64-bit integers as numbers (as rivus writes them)."""
    from google.protobuf import json_format
    from google.protobuf.descriptor import FieldDescriptor

    wide = (FieldDescriptor.CPPTYPE_INT64, FieldDescriptor.CPPTYPE_UINT64)

    def fix(d, desc):
        for f in desc.fields:
            if f.name not in d:
                continue
            v = d[f.name]
            if f.message_type is not None and f.message_type.GetOptions().map_entry:
                value_field = f.message_type.fields_by_name["value"]
                if value_field.cpp_type in wide:
                    d[f.name] = {k: int(x) for k, x in v.items()}
            elif f.cpp_type in wide:
                d[f.name] = [int(x) for x in v] if isinstance(v, list) else int(v)
            elif f.message_type is not None and f.message_type.full_name != "google.protobuf.Timestamp":
                if isinstance(v, list):
                    for item in v:
                        fix(item, f.message_type)
                elif isinstance(v, dict):
                    fix(v, f.message_type)
        return d

    d = json_format.MessageToDict(
        msg, preserving_proto_field_name=True, always_print_fields_with_no_presence=True
    )
    return fix(d, msg.DESCRIPTOR)


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
    # A request without an answer times out and is retried by the client, never hangs.
    client = SchemaRegistryClient({"url": registry, "timeout": 10})
    if mode == "proto-produce":
        from confluent_kafka.schema_registry.protobuf import ProtobufSerializer
        from google.protobuf import json_format

        cls = proto_class(sys.argv[5])
        ser = ProtobufSerializer(cls, client, {"use.deprecated.format": False})
        p = Producer({"bootstrap.servers": bootstrap})
        ctx = SerializationContext(topic, MessageField.VALUE)
        for line in open(sys.argv[6]):
            if line.strip():
                p.produce(topic, value=ser(json_format.ParseDict(json.loads(line), cls()), ctx))
        p.flush(30)
        return
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
    elif mode in ("consume", "json-consume", "proto-consume"):
        n = int(sys.argv[5])
        convert = to_json
        if mode == "consume":
            de = AvroDeserializer(client)
        elif mode == "proto-consume":
            from confluent_kafka.schema_registry.protobuf import ProtobufDeserializer

            de = ProtobufDeserializer(proto_class(sys.argv[6]), {"use.deprecated.format": False})
            convert = proto_to_json
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
                key = to_json(de(key, SerializationContext(topic, MessageField.KEY)))
            value = de(m.value(), SerializationContext(topic, MessageField.VALUE))
            print(json.dumps({"key": key, "value": convert(value)}), flush=True)
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
