//! The plugins run ahead of answering (docs/rewrite.md): what `rewrite` makes of a question,
//! with the answers it makes written through the one message builder, [`Responder`], as every
//! reply is.

use super::{Context, Outcome, Responder};
use crate::rewrite::{Made, Plan, Plugins, Rewritten};
use crate::wire::query::parse_query_into;
use crate::wire::types::flags;
use crate::wire::{LowerName, Query};

/// What the plugins made of a query, its reply written when they answered it. The rewritten
/// query stays on the stack: boxing it would allocate per rewritten question.
#[allow(clippy::large_enum_variant)]
pub(crate) enum Before<'p> {
    /// Nothing: answer the query as it is.
    Pass,
    /// A plugin answered it; the reply is written.
    Answered(Outcome),
    /// A rule rewrote it: answer [`Rewritten::query`], then [`Rewritten::restore`] the reply.
    Rewritten(Rewritten<'p>),
}

/// Runs `plugins` ahead of answering `query`: a question a rule rewrites comes back
/// [`Before::Rewritten`], to be answered and restored; one a template, `whoami` or `any`
/// answers is written into `out`, for the client's own question.
pub(crate) fn before<'p>(plugins: &'p Plugins, query: &[u8], ctx: &Context<'_>, out: &mut [u8]) -> Before<'p> {
    match plugins.plan(query, &ctx.client, ctx.transport) {
        Plan::Pass => Before::Pass,
        Plan::Answer(made) => Before::Answered(write(query, &made, ctx, out)),
        Plan::Rewrite(rewritten, None) => Before::Rewritten(rewritten),
        Plan::Rewrite(rewritten, Some(made)) => {
            let outcome = write(rewritten.query(), &made, ctx, out);
            Before::Answered(rewritten.restore(outcome, out))
        }
    }
}

/// The reply to `query` (one the plugins parsed) with the answer a plugin `made`.
fn write(query: &[u8], made: &Made, ctx: &Context<'_>, out: &mut [u8]) -> Outcome {
    let mut qname = LowerName::default();
    let mut q = Query::default();
    if let Err(reason) = parse_query_into(query, &mut qname, &mut q) {
        return Outcome::Drop(reason);
    }
    let mut r = Responder::new(query, &q, ctx, out);
    r.copy_question(&q, &qname);
    match made {
        Made::Hinfo(record) => r.records(1, record, 1),
        Made::Records(code, sections) => {
            r.flags |= flags::AA;
            r.set_rcode(*code);
            for (i, (records, count)) in sections.iter().enumerate() {
                if *count > 0 {
                    r.records(i + 1, records, *count);
                }
            }
        }
    }
    Outcome::Reply(r.finish(&q))
}
