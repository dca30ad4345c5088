//! The Protocol Buffers wire format, as much of it as Chakra's `et_def.proto`
//! needs: length-prefixed records, and the fields of `Node`,
//! `AttributeProto` and `IOInfo` that netsim reads, decoded straight from
//! the bytes. Hand-written rather than generated (prost and a build script)
//! because it is a few dozen fields, every length is checked against the
//! bytes that remain before anything is taken (a corrupt length is an
//! error, never an allocation), and each error names the field. The field
//! numbers are checked against the committed copy of the schema
//! (`et_def.proto`) by a unit test below.

/// Field numbers and enum values of `et_def.proto` (package `ChakraProtoMsg`).
pub mod schema {
    pub const NODE_ID: u32 = 1;
    pub const NODE_NAME: u32 = 2;
    pub const NODE_TYPE: u32 = 3;
    pub const NODE_CTRL_DEPS: u32 = 4;
    pub const NODE_DATA_DEPS: u32 = 5;
    pub const NODE_DURATION_MICROS: u32 = 7;
    pub const NODE_INPUTS: u32 = 8;
    pub const NODE_ATTR: u32 = 10;
    pub const IO_INFO_VALUES: u32 = 1;
    pub const ATTR_NAME: u32 = 1;
    pub const ATTR_INT32_VAL: u32 = 7;
    pub const ATTR_INT64_VAL: u32 = 9;
    pub const ATTR_UINT32_VAL: u32 = 11;
    pub const ATTR_UINT64_VAL: u32 = 13;
    pub const ATTR_SINT32_VAL: u32 = 15;
    pub const ATTR_SINT64_VAL: u32 = 17;
    pub const ATTR_FIXED32_VAL: u32 = 19;
    pub const ATTR_FIXED64_VAL: u32 = 21;
    pub const ATTR_SFIXED32_VAL: u32 = 23;
    pub const ATTR_SFIXED64_VAL: u32 = 25;
    pub const ATTR_BOOL_VAL: u32 = 27;
    pub const ATTR_STRING_VAL: u32 = 29;
    /// The `oneof value` of `AttributeProto` spans these field numbers.
    pub const ATTR_VALUES: std::ops::RangeInclusive<u32> = 3..=32;

    pub const INVALID_NODE: u64 = 0;
    pub const METADATA_NODE: u64 = 1;
    pub const MEM_LOAD_NODE: u64 = 2;
    pub const MEM_STORE_NODE: u64 = 3;
    pub const COMP_NODE: u64 = 4;
    pub const COMM_SEND_NODE: u64 = 5;
    pub const COMM_RECV_NODE: u64 = 6;
    pub const COMM_COLL_NODE: u64 = 7;

    pub const ALL_REDUCE: u64 = 0;
    pub const REDUCE: u64 = 1;
    pub const ALL_GATHER: u64 = 2;
    pub const GATHER: u64 = 3;
    pub const SCATTER: u64 = 4;
    pub const BROADCAST: u64 = 5;
    pub const ALL_TO_ALL: u64 = 6;
    pub const REDUCE_SCATTER: u64 = 7;
    pub const REDUCE_SCATTER_BLOCK: u64 = 8;
    pub const BARRIER: u64 = 9;
}

/// A decoded field's payload, by wire type.
#[derive(Clone, Copy, Debug)]
enum Payload<'a> {
    Varint(u64),
    Fixed64(u64),
    Bytes(&'a [u8]),
    Fixed32(u32),
}

/// A cursor over bytes that never reads past their end.
struct Cursor<'a> {
    bytes: &'a [u8],
    pos: usize,
}

impl<'a> Cursor<'a> {
    fn new(bytes: &'a [u8]) -> Cursor<'a> {
        Cursor { bytes, pos: 0 }
    }

    fn at_end(&self) -> bool {
        self.pos == self.bytes.len()
    }

    fn varint(&mut self) -> Result<u64, String> {
        let mut value = 0u64;
        for shift in (0..70).step_by(7) {
            let Some(&byte) = self.bytes.get(self.pos) else {
                return Err("a number runs past the end".into());
            };
            self.pos += 1;
            if shift == 63 && byte > 1 {
                return Err("a number is longer than 64 bits".into());
            }
            value |= u64::from(byte & 0x7f) << shift;
            if byte < 0x80 {
                return Ok(value);
            }
        }
        Err("a number is longer than 64 bits".into())
    }

    fn take(&mut self, len: u64) -> Result<&'a [u8], String> {
        let left = self.bytes.len() - self.pos;
        if len > left as u64 {
            return Err(format!(
                "a length of {len} bytes runs past the end ({left} bytes left)"
            ));
        }
        let start = self.pos;
        self.pos += len as usize;
        Ok(&self.bytes[start..self.pos])
    }

    /// The next field's number and payload.
    fn field(&mut self) -> Result<(u32, Payload<'a>), String> {
        let key = self.varint()?;
        let number = u32::try_from(key >> 3).ok().filter(|&n| n > 0);
        let Some(number) = number else {
            return Err(format!("field number {} is not a protobuf field", key >> 3));
        };
        let payload = match key & 7 {
            0 => Payload::Varint(self.varint()?),
            1 => Payload::Fixed64(u64::from_le_bytes(
                self.take(8)?.try_into().expect("8 bytes"),
            )),
            2 => {
                let len = self.varint()?;
                Payload::Bytes(self.take(len)?)
            }
            5 => Payload::Fixed32(u32::from_le_bytes(
                self.take(4)?.try_into().expect("4 bytes"),
            )),
            wire => {
                return Err(format!(
                    "field {number} has wire type {wire}, which proto3 does not write"
                ))
            }
        };
        Ok((number, payload))
    }
}

/// Splits a file into its records: each a varint length, then that many
/// bytes. Returns the records, or the 1-based number of the record that is
/// cut short and what is wrong.
pub fn records(bytes: &[u8]) -> Result<Vec<&[u8]>, (usize, String)> {
    let mut cursor = Cursor::new(bytes);
    let mut records = Vec::new();
    while !cursor.at_end() {
        let n = records.len() + 1;
        let len = cursor
            .varint()
            .map_err(|e| (n, format!("its length prefix: {e}")))?;
        if len > u64::from(u32::MAX) {
            return Err((
                n,
                format!("its length prefix {len} is larger than a varint32"),
            ));
        }
        records.push(cursor.take(len).map_err(|e| (n, e))?);
    }
    Ok(records)
}

/// One attribute's value, as the integer, string or other kind it is.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Value<'a> {
    /// Any integer field of the oneof (`int32` .. `sfixed64`, `bool`).
    Int(i128),
    Str(&'a [u8]),
    /// A float, a list or bytes: nothing netsim reads is one.
    Other(u32),
    /// No value set.
    Unset,
}

/// One `AttributeProto`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Attr<'a> {
    pub name: &'a [u8],
    pub value: Value<'a>,
}

/// The fields of one `Node` netsim reads.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Node<'a> {
    pub id: u64,
    pub name: &'a [u8],
    /// The `NodeType` number as written (proto3 enums are open).
    pub node_type: u64,
    pub ctrl_deps: Vec<u64>,
    pub data_deps: Vec<u64>,
    pub duration_micros: u64,
    /// `inputs.values`: a METADATA node's process groups.
    pub inputs_values: &'a [u8],
    pub attrs: Vec<Attr<'a>>,
}

impl<'a> Node<'a> {
    /// The last attribute named `name` (protobuf's rule for repeated keys
    /// read as one), if any.
    pub fn attr(&self, name: &str) -> Option<&Attr<'a>> {
        self.attrs.iter().rev().find(|a| a.name == name.as_bytes())
    }
}

fn varint_of(number: u32, what: &str, payload: Payload) -> Result<u64, String> {
    match payload {
        Payload::Varint(v) => Ok(v),
        _ => Err(format!("field {number} ({what}) is not a varint")),
    }
}

fn bytes_of<'a>(number: u32, what: &str, payload: Payload<'a>) -> Result<&'a [u8], String> {
    match payload {
        Payload::Bytes(b) => Ok(b),
        _ => Err(format!("field {number} ({what}) is not length-delimited")),
    }
}

/// A `repeated uint64`: packed (one length-delimited run) or one varint per field.
fn push_ids(out: &mut Vec<u64>, number: u32, what: &str, payload: Payload) -> Result<(), String> {
    match payload {
        Payload::Varint(v) => out.push(v),
        Payload::Bytes(b) => {
            let mut c = Cursor::new(b);
            while !c.at_end() {
                out.push(c.varint().map_err(|e| format!("{what}: {e}"))?);
            }
        }
        _ => {
            return Err(format!(
                "field {number} ({what}) is neither varints nor packed"
            ))
        }
    }
    Ok(())
}

/// Decodes a `Node` record. Unknown fields are skipped, as protobuf does.
pub fn node(bytes: &[u8]) -> Result<Node<'_>, String> {
    use schema::*;
    let mut node = Node::default();
    let mut c = Cursor::new(bytes);
    while !c.at_end() {
        let (number, payload) = c.field()?;
        match number {
            NODE_ID => node.id = varint_of(number, "id", payload)?,
            NODE_NAME => node.name = bytes_of(number, "name", payload)?,
            NODE_TYPE => node.node_type = varint_of(number, "type", payload)?,
            NODE_CTRL_DEPS => push_ids(&mut node.ctrl_deps, number, "ctrl_deps", payload)?,
            NODE_DATA_DEPS => push_ids(&mut node.data_deps, number, "data_deps", payload)?,
            NODE_DURATION_MICROS => {
                node.duration_micros = varint_of(number, "duration_micros", payload)?
            }
            NODE_INPUTS => {
                let mut io = Cursor::new(bytes_of(number, "inputs", payload)?);
                while !io.at_end() {
                    let (n, p) = io.field().map_err(|e| format!("inputs: {e}"))?;
                    if n == IO_INFO_VALUES {
                        node.inputs_values = bytes_of(n, "inputs.values", p)?;
                    }
                }
            }
            NODE_ATTR => node.attrs.push(attr(bytes_of(number, "attr", payload)?)?),
            _ => {}
        }
    }
    Ok(node)
}

/// Checks that a record is a well-formed message (the `GlobalMetadata`,
/// whose content netsim does not use).
pub fn message(bytes: &[u8]) -> Result<(), String> {
    let mut c = Cursor::new(bytes);
    while !c.at_end() {
        c.field()?;
    }
    Ok(())
}

fn attr(bytes: &[u8]) -> Result<Attr<'_>, String> {
    use schema::*;
    let mut out = Attr {
        name: b"",
        value: Value::Unset,
    };
    let mut c = Cursor::new(bytes);
    while !c.at_end() {
        let (number, payload) = c.field().map_err(|e| format!("attr: {e}"))?;
        if number == ATTR_NAME {
            out.name = bytes_of(number, "attr.name", payload)?;
        } else if ATTR_VALUES.contains(&number) {
            out.value = value(number, payload)
                .map_err(|e| format!("attribute {}: {e}", String::from_utf8_lossy(out.name)))?;
        }
    }
    Ok(out)
}

/// One field of the `oneof value`, by its number's declared type.
fn value(number: u32, payload: Payload<'_>) -> Result<Value<'_>, String> {
    use schema::*;
    let mismatch = || {
        Err(format!(
            "field {number} has the wrong wire type for its declared type"
        ))
    };
    let int = match (number, payload) {
        (ATTR_INT32_VAL, Payload::Varint(v)) => i128::from(v as i32),
        (ATTR_INT64_VAL, Payload::Varint(v)) => i128::from(v as i64),
        (ATTR_UINT32_VAL, Payload::Varint(v)) => i128::from(v as u32),
        (ATTR_UINT64_VAL, Payload::Varint(v)) => i128::from(v),
        (ATTR_SINT32_VAL, Payload::Varint(v)) => i128::from(zigzag(v) as i32),
        (ATTR_SINT64_VAL, Payload::Varint(v)) => i128::from(zigzag(v)),
        (ATTR_FIXED32_VAL, Payload::Fixed32(v)) => i128::from(v),
        (ATTR_FIXED64_VAL, Payload::Fixed64(v)) => i128::from(v),
        (ATTR_SFIXED32_VAL, Payload::Fixed32(v)) => i128::from(v as i32),
        (ATTR_SFIXED64_VAL, Payload::Fixed64(v)) => i128::from(v as i64),
        (ATTR_BOOL_VAL, Payload::Varint(v)) => i128::from(v != 0),
        (ATTR_STRING_VAL, Payload::Bytes(b)) => return Ok(Value::Str(b)),
        (
            ATTR_INT32_VAL | ATTR_INT64_VAL | ATTR_UINT32_VAL | ATTR_UINT64_VAL | ATTR_SINT32_VAL
            | ATTR_SINT64_VAL | ATTR_FIXED32_VAL | ATTR_FIXED64_VAL | ATTR_SFIXED32_VAL
            | ATTR_SFIXED64_VAL | ATTR_BOOL_VAL | ATTR_STRING_VAL,
            _,
        ) => return mismatch(),
        _ => return Ok(Value::Other(number)),
    };
    Ok(Value::Int(int))
}

fn zigzag(v: u64) -> i64 {
    (v >> 1) as i64 ^ -((v & 1) as i64)
}

#[cfg(test)]
mod tests {
    use super::schema::*;
    use super::*;

    const PROTO: &str = include_str!("et_def.proto");

    /// The number the schema gives `name` inside `block` (`message X` or `enum X`).
    fn declared(block: &str, name: &str) -> u64 {
        let start = PROTO
            .find(&format!("{block} {{"))
            .unwrap_or_else(|| panic!("{block}"));
        let body = &PROTO[start..start + PROTO[start..].find("\n}").unwrap()];
        body.lines()
            .filter_map(|l| l.split("//").next().unwrap().trim().strip_suffix(';'))
            .find_map(|l| {
                let (lhs, rhs) = l.split_once('=')?;
                (lhs.split_whitespace().last()? == name).then(|| rhs.trim().parse().unwrap())
            })
            .unwrap_or_else(|| panic!("{block}: no {name}"))
    }

    #[test]
    fn field_numbers_are_the_schemas() {
        let fields: [(&str, &str, u32); 21] = [
            ("message Node", "id", NODE_ID),
            ("message Node", "name", NODE_NAME),
            ("message Node", "type", NODE_TYPE),
            ("message Node", "ctrl_deps", NODE_CTRL_DEPS),
            ("message Node", "data_deps", NODE_DATA_DEPS),
            ("message Node", "duration_micros", NODE_DURATION_MICROS),
            ("message Node", "inputs", NODE_INPUTS),
            ("message Node", "attr", NODE_ATTR),
            ("message IOInfo", "values", IO_INFO_VALUES),
            ("message AttributeProto", "name", ATTR_NAME),
            ("message AttributeProto", "int32_val", ATTR_INT32_VAL),
            ("message AttributeProto", "int64_val", ATTR_INT64_VAL),
            ("message AttributeProto", "uint32_val", ATTR_UINT32_VAL),
            ("message AttributeProto", "uint64_val", ATTR_UINT64_VAL),
            ("message AttributeProto", "sint32_val", ATTR_SINT32_VAL),
            ("message AttributeProto", "sint64_val", ATTR_SINT64_VAL),
            ("message AttributeProto", "fixed32_val", ATTR_FIXED32_VAL),
            ("message AttributeProto", "fixed64_val", ATTR_FIXED64_VAL),
            ("message AttributeProto", "sfixed32_val", ATTR_SFIXED32_VAL),
            ("message AttributeProto", "sfixed64_val", ATTR_SFIXED64_VAL),
            ("message AttributeProto", "bool_val", ATTR_BOOL_VAL),
        ];
        for (block, name, number) in fields {
            assert_eq!(declared(block, name), u64::from(number), "{block}.{name}");
        }
        assert_eq!(
            declared("message AttributeProto", "string_val"),
            u64::from(ATTR_STRING_VAL)
        );
        assert_eq!(
            declared("message AttributeProto", "double_val"),
            u64::from(*ATTR_VALUES.start())
        );
        assert_eq!(
            declared("message AttributeProto", "bytes_list"),
            u64::from(*ATTR_VALUES.end())
        );
        let enums: [(&str, &str, u64); 18] = [
            ("enum NodeType", "INVALID_NODE", INVALID_NODE),
            ("enum NodeType", "METADATA_NODE", METADATA_NODE),
            ("enum NodeType", "MEM_LOAD_NODE", MEM_LOAD_NODE),
            ("enum NodeType", "MEM_STORE_NODE", MEM_STORE_NODE),
            ("enum NodeType", "COMP_NODE", COMP_NODE),
            ("enum NodeType", "COMM_SEND_NODE", COMM_SEND_NODE),
            ("enum NodeType", "COMM_RECV_NODE", COMM_RECV_NODE),
            ("enum NodeType", "COMM_COLL_NODE", COMM_COLL_NODE),
            ("enum CollectiveCommType", "ALL_REDUCE", ALL_REDUCE),
            ("enum CollectiveCommType", "REDUCE", REDUCE),
            ("enum CollectiveCommType", "ALL_GATHER", ALL_GATHER),
            ("enum CollectiveCommType", "GATHER", GATHER),
            ("enum CollectiveCommType", "SCATTER", SCATTER),
            ("enum CollectiveCommType", "BROADCAST", BROADCAST),
            ("enum CollectiveCommType", "ALL_TO_ALL", ALL_TO_ALL),
            ("enum CollectiveCommType", "REDUCE_SCATTER", REDUCE_SCATTER),
            (
                "enum CollectiveCommType",
                "REDUCE_SCATTER_BLOCK",
                REDUCE_SCATTER_BLOCK,
            ),
            ("enum CollectiveCommType", "BARRIER", BARRIER),
        ];
        for (block, name, number) in enums {
            assert_eq!(declared(block, name), number, "{block}.{name}");
        }
    }

    #[test]
    fn integers_decode_by_their_declared_type() {
        // int32 -1 is written as ten bytes, sign-extended.
        let minus_one = [0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01];
        assert_eq!(Cursor::new(&minus_one).varint(), Ok(u64::MAX));
        assert_eq!(
            value(ATTR_INT32_VAL, Payload::Varint(u64::MAX)),
            Ok(Value::Int(-1))
        );
        assert_eq!(
            value(ATTR_SINT64_VAL, Payload::Varint(3)),
            Ok(Value::Int(-2))
        );
        assert_eq!(
            value(ATTR_UINT64_VAL, Payload::Varint(u64::MAX)),
            Ok(Value::Int(u64::MAX.into()))
        );
        assert!(value(ATTR_INT64_VAL, Payload::Fixed32(1)).is_err());
        let eleven = [0xff; 11];
        assert!(Cursor::new(&eleven).varint().is_err());
    }

    #[test]
    fn a_length_past_the_end_is_an_error() {
        let err = (
            2,
            "a length of 5 bytes runs past the end (1 bytes left)".to_string(),
        );
        assert_eq!(records(&[2, 0, 0, 5, 7]), Err(err));
        assert!(records(&[0xff, 0xff, 0xff, 0xff, 0x7f]).is_err());
        assert!(node(&[0x0a, 0x80, 0x80, 0x80, 0x80, 0x08]).is_err());
    }
}
