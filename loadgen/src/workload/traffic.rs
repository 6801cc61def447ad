//! A workload connection: the [`Traffic`] that draws each request from the mix and
//! checks each answer.
//!
//! Per request it draws an operation and its keys ([`OperationStream`]), waits for a
//! write in flight on the same entity when it writes ([`Oracle::begin_write`]), renders
//! the body and headers from the operation's templates (one allocation for the body),
//! and afterwards acknowledges the write or checks the read ([`check_answer`]).

use std::cell::RefCell;
use std::future::Future;
use std::net::SocketAddr;
use std::time::Instant;

use bytes::Bytes;
use hyper::header::{HeaderName, HeaderValue};

use super::check::check_answer;
use super::mix::{OperationStream, Role};
use super::oracle::{Oracle, PendingWrite};
use super::recorder::FreshnessRecorder;
use super::spec::Workload;
use crate::bench::client::{Control, Traffic};
use crate::bench::outcome::{classify, Outcome};
use crate::bench::request_template::{RequestTemplate, WireRequest};

/// The request in flight: which operation, and the write it carries.
pub struct Ticket {
    op: usize,
    write: Option<PendingWrite>,
}

/// One connection of a workload run.
pub struct WorkloadTraffic<'a> {
    workload: &'a Workload,
    oracle: &'a Oracle,
    /// Address, path and the headers every request carries (host, content-type).
    base: &'a RequestTemplate,
    stream: OperationStream,
    recorder: &'a RefCell<FreshnessRecorder>,
}

impl<'a> WorkloadTraffic<'a> {
    pub fn new(
        workload: &'a Workload,
        oracle: &'a Oracle,
        base: &'a RequestTemplate,
        role: Role,
        index: u64,
        recorder: &'a RefCell<FreshnessRecorder>,
    ) -> WorkloadTraffic<'a> {
        WorkloadTraffic {
            workload,
            oracle,
            base,
            stream: OperationStream::new(workload, role, index),
            recorder,
        }
    }
}

impl Traffic for WorkloadTraffic<'_> {
    type Ticket = Ticket;

    fn addr(&self) -> SocketAddr {
        self.base.addr
    }

    fn next(&mut self, _: &Control) -> impl Future<Output = (WireRequest, Ticket)> {
        let op_index = self.stream.next(self.workload);
        async move {
            let op = &self.workload.operations[op_index];
            let keys = &self.stream.keys;
            let write = match &op.write {
                Some(w) => Some(
                    self.oracle
                        .begin_write(w.type_index, w.id.render(keys, 0))
                        .await,
                ),
                None => None,
            };
            let version = write.as_ref().map_or(0, |w| w.version);
            let rendered: Vec<(&HeaderName, Vec<u8>)> = op
                .headers
                .iter()
                .filter_map(|(name, value)| {
                    let mut text = Vec::new();
                    value.render_into(keys, 0, &mut text);
                    // Checked at load time with placeholder values: digits keep it valid.
                    HeaderValue::from_bytes(&text)
                        .is_ok()
                        .then_some((name, text))
                })
                .collect();
            let extra: Vec<(&HeaderName, &[u8])> = rendered
                .iter()
                .map(|(name, text)| (*name, text.as_slice()))
                .collect();
            let request = match &op.get {
                Some(get) => {
                    let mut query = Vec::with_capacity(op.document.len() * 2 + 64);
                    get.render_into(keys, version, &mut query);
                    self.base.build_get(&query, &extra)
                }
                None => {
                    let mut body = Vec::with_capacity(op.document.len() + 64);
                    op.body.render_into(keys, version, &mut body);
                    self.base.build_with(Bytes::from(body), &extra)
                }
            };
            (
                request,
                Ticket {
                    op: op_index,
                    write,
                },
            )
        }
    }

    fn finish(
        &mut self,
        ticket: Ticket,
        answer: Result<(u16, &[u8]), Outcome>,
        sent: Instant,
        done: Instant,
        in_window: bool,
    ) -> Outcome {
        let outcome = match answer {
            Ok((status, body)) => classify(status, body),
            Err(outcome) => outcome,
        };
        let mut recorder = self.recorder.borrow_mut();
        if in_window {
            recorder.request(ticket.op, outcome, done - sent);
        }
        match ticket.write {
            Some(write) if outcome == Outcome::Ok => {
                self.oracle.acknowledge(write, done);
                recorder.writes_acked += 1;
            }
            // A failed write is never acknowledged; dropping it lets the next one go.
            Some(_) => recorder.writes_failed += 1,
            None => {
                if let (Outcome::Ok, Ok((_, body))) = (outcome, answer) {
                    check_answer(
                        self.workload,
                        ticket.op,
                        &self.stream.keys,
                        body,
                        Some(self.oracle),
                        self.oracle.clock(sent),
                        in_window,
                        &mut recorder,
                    );
                }
            }
        }
        outcome
    }
}
