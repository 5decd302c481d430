//! The "split" example operator in Rust: one record per word of a text. It
//! mirrors udfs/split/splitter/splitter.go, which documents the
//! configuration and the exact rules; change both together.

use eddy::json::{self, Kind, Step};
use eddy::{Emitter, Operator, Record, Result};

struct Split {
    field: Option<Vec<u8>>, // None: the whole value is the text
    lowercase: bool,
    text: Vec<u8>,  // scratch: the unescaped member
    word: Vec<u8>,  // scratch: the lowered word
    value: Vec<u8>, // scratch: the output value
}

fn is_word_byte(c: u8) -> bool {
    c.is_ascii_alphanumeric()
}

impl Operator for Split {
    fn open(config: &[u8]) -> Result<Split> {
        let mut s = Split { field: None, lowercase: false, text: Vec::new(), word: Vec::new(), value: Vec::new() };
        let mut it = json::objects(config).ok_or("split: config is not a JSON object")?;
        let mut seen_lower = false;
        loop {
            match it.next_step() {
                Step::Malformed => return Err("split: config is not valid JSON".into()),
                Step::End => return Ok(s),
                Step::Field(k, v) => {
                    if json::equal(k, b"field") && s.field.is_none() {
                        if json::kind_of(v) != Kind::String {
                            return Err("split: config: field must be a string".into());
                        }
                        s.field = Some(json::unquote(v));
                    } else if json::equal(k, b"lowercase") && !seen_lower {
                        seen_lower = true;
                        s.lowercase = match json::kind_of(v) {
                            Kind::True => true,
                            Kind::False => false,
                            _ => return Err("split: config: lowercase must be true or false".into()),
                        };
                    } else {
                        return Err(
                            format!("split: config: unknown or repeated key {}", String::from_utf8_lossy(k)).into()
                        );
                    }
                }
            }
        }
    }

    fn process(&mut self, r: &Record<'_>, out: &mut Emitter) -> Result {
        let text: &[u8] = match &self.field {
            None => r.value,
            Some(f) => match json::field(r.value, f) {
                Some(v) if json::kind_of(v) == Kind::String => {
                    self.text.clear();
                    json::unquote_into(v, &mut self.text);
                    &self.text
                }
                _ => return Ok(()),
            },
        };
        let mut i = 0;
        loop {
            while i < text.len() && !is_word_byte(text[i]) {
                i += 1;
            }
            let start = i;
            while i < text.len() && is_word_byte(text[i]) {
                i += 1;
            }
            if i == start {
                return Ok(());
            }
            let mut word = &text[start..i];
            if self.lowercase {
                self.word.clear();
                self.word.extend(word.iter().map(|c| c.to_ascii_lowercase()));
                word = &self.word;
            }
            self.value.clear();
            self.value.extend_from_slice(b"{\"word\":\"");
            self.value.extend_from_slice(word);
            self.value.extend_from_slice(b"\"}");
            out.emit_kv(word, &self.value, r.timestamp)?;
        }
    }
}

eddy::operator!(Split);
