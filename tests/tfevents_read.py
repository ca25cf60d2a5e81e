"""tfevents_read.py — decodes TensorBoard event files independently of sfvit's writer: the
TFRecord framing (length, masked CRC-32C of the length, data, masked CRC-32C of the data)
and the Event / Summary / Summary.Value protobuf fields, with a plain protobuf wire-format
reader. Prints one JSON line per scalar: {"file", "step", "tag", "value", "wall_time"}.
Exits 1 on a bad CRC, a truncated record or an unexpected field type.
Usage: python3 tfevents_read.py FILE...
"""
import json
import struct
import sys


def crc32c(data):
    crc = 0xFFFFFFFF
    for b in data:
        crc ^= b
        for _ in range(8):
            crc = (crc >> 1) ^ 0x82F63B78 if crc & 1 else crc >> 1
    return crc ^ 0xFFFFFFFF


def masked(data):
    c = crc32c(data)
    return (((c >> 15) | (c << 17)) + 0xA282EAD8) & 0xFFFFFFFF


def fields(buf):
    """(field number, wire type, value) of a protobuf message."""
    i = 0
    while i < len(buf):
        key, i = varint(buf, i)
        num, wire = key >> 3, key & 7
        if wire == 0:
            v, i = varint(buf, i)
        elif wire == 1:
            v, i = buf[i:i + 8], i + 8
        elif wire == 2:
            n, i = varint(buf, i)
            v, i = buf[i:i + n], i + n
        elif wire == 5:
            v, i = buf[i:i + 4], i + 4
        else:
            raise ValueError("wire type %d" % wire)
        yield num, wire, v


def varint(buf, i):
    shift = result = 0
    while True:
        b = buf[i]
        i += 1
        result |= (b & 0x7F) << shift
        shift += 7
        if not b & 0x80:
            return result, i


def main():
    for path in sys.argv[1:]:
        data = open(path, "rb").read()
        i = records = 0
        while i < len(data):
            if i + 12 > len(data):
                sys.exit("%s: truncated record header at byte %d" % (path, i))
            (n,) = struct.unpack_from("<Q", data, i)
            (len_crc,) = struct.unpack_from("<I", data, i + 8)
            if len_crc != masked(data[i:i + 8]):
                sys.exit("%s: bad length CRC at byte %d" % (path, i))
            body = data[i + 12:i + 12 + n]
            (body_crc,) = struct.unpack_from("<I", data, i + 12 + n)
            if len(body) != n or body_crc != masked(body):
                sys.exit("%s: bad data CRC at byte %d" % (path, i))
            i += 16 + n
            event = {"file": path, "step": 0}
            for num, wire, v in fields(body):
                if num == 1 and wire == 1:
                    event["wall_time"] = struct.unpack("<d", v)[0]
                elif num == 2 and wire == 0:
                    event["step"] = v
                elif num == 3 and wire == 2:
                    event["file_version"] = v.decode()
                elif num == 5 and wire == 2:
                    for snum, _, sv in fields(v):
                        assert snum == 1, "Summary field %d" % snum
                        value = dict(event)
                        for vnum, vwire, vv in fields(sv):
                            if vnum == 1 and vwire == 2:
                                value["tag"] = vv.decode()
                            elif vnum == 2 and vwire == 5:
                                value["value"] = struct.unpack("<f", vv)[0]
                        print(json.dumps(value))
                else:
                    sys.exit("%s: unexpected Event field %d (wire %d)" % (path, num, wire))
            if records == 0 and event.get("file_version") != "brain.Event:2":
                sys.exit("%s: first record is not the file_version event" % path)
            records += 1


main()
