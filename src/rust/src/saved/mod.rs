//! Saved state: the bytes a `"wisp"` fit keeps (its [`Plan`], `fit$plan`)
//! and the bytes of an internal model (`wisp_model$bytes`).
//!
//! # Layout
//!
//! A saved state is one checksummed frame of [`crate::codec`] with the magic
//! `WISPSAVE`:
//!
//! ```text
//! "WISPSAVE" | payload length (u64, LE) | FNV-1a-64 of (length ++ payload) (u64, LE) | payload
//! payload = format (u32, LE) | kind (u8: 1 plan, 2 model) | writer length (u8) | writer | body
//! ```
//!
//! `writer` is the version of wispack that wrote it, `body` the bincode of
//! the format's wire structures. The checksum covers everything after the
//! length, so any damaged byte is found before anything is decoded.
//!
//! # Versions
//!
//! - format 0: wispack 0.1.0 before saved fits were versioned kept raw
//!   bincode of its in-memory plan, without a frame; [`legacy`] reads it.
//! - format 1: the wire structures of this module. Still written for every
//!   plan that format 2 does not need.
//! - format 2: a plan is format 1's followed by [`PlanExtrasV2`]
//!   (a count fit's fixed dispersion, the effects a reduced count model
//!   holds at 0). Written only for plans that have one of them,
//!   so that a wispack reading format 1 only refuses exactly the fits it
//!   would misread; models are written as in format 1.
//! - format 3 ([`FORMAT`]): format 2's plan followed by [`PlanExtrasV3`]
//!   (the exposure of every token of a binned table, exposure code 3).
//!   Written only for fits of binned tables, for the same reason.
//!
//! The wire structures store what a model is made of (labels, factors,
//! degrees, the row of every token, its count, the settings), never what is
//! derived from it (treatments, W, the summed counts, the parameter layout):
//! decoding rebuilds those with the same constructors that built them, and
//! those constructors check every invariant ([`crate::design::Design::new`],
//! [`crate::data::SummedTable::from_token_rows`], [`crate::original::Model::new`],
//! and [`check_plan`] for the change points). So corrupted bytes that still
//! decode give an error or a valid model, never a panic later.
//!
//! Any change to a wire structure, or a new [`Plan`] variant, needs
//! `FORMAT + 1` and a reader of the old format here (as [`legacy`] reads
//! format 0), so that fits saved by earlier versions keep working. A format
//! newer than [`FORMAT`] is refused with a message naming the version that
//! wrote it.

use crate::bootstrap::{Plan, WarpedSigmoidPlan};
use crate::changepoint::DetectedChangePoints;
use crate::codec::{decode_exact, encode_frame, frame_payload, FrameError};
use crate::data::{SummedTable, TableShape};
use crate::design::{Design, Factor, Structure};
use crate::error::{Error, Result};
use crate::original::fit::FitSettings;
use crate::original::pipeline::PipelineSettings;
use crate::original::StartSettings;
use crate::original::{Model, Settings};
use serde::{Deserialize, Serialize};

/// The frame magic of a saved state.
const MAGIC: &[u8] = b"WISPSAVE";
/// The format this version writes (and the newest it reads).
pub(crate) const FORMAT: u32 = 3;
/// The format of plans with what format 2 adds and nothing of format 3.
const FORMAT_2: u32 = 2;
/// The format of plans without what format 2 adds, and of models.
const FORMAT_1: u32 = 1;
/// The version of wispack recorded as the writer.
const WRITER: &str = env!("CARGO_PKG_VERSION");
/// Longest payload accepted (a damaged length field can claim anything).
const MAX_PAYLOAD_BYTES: u64 = 1 << 36;

/// What a saved state holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Kind {
    Plan = 1,
    Model = 2,
}

/// What a saved state turned out to be.
pub(crate) enum Saved {
    Plan(Plan),
    Model(Model),
}

impl Saved {
    /// The original likelihood's model: a plan's, or the model itself.
    pub(crate) fn into_model(self) -> Result<Model> {
        match self {
            Saved::Plan(Plan::WarpedSigmoid(plan)) => Ok(plan.model),
            Saved::Plan(Plan::Count(_)) => Err(Error::input(
                "this fit uses the count likelihood (likelihood = \"nb\"), which has no \
                 model of the original's kind",
            )),
            Saved::Model(model) => Ok(model),
        }
    }
}

/// The saved state of a fit's plan.
pub(crate) fn encode_plan(plan: &Plan) -> Result<Vec<u8>> {
    let wire = match plan {
        Plan::WarpedSigmoid(plan) => PlanV1::WarpedSigmoid(WarpedSigmoidPlanV1::from_plan(plan)),
        Plan::Count(plan) => PlanV1::Count(Box::new(nb_wire::CountPlanV1::from_plan(plan))),
    };
    let extras = PlanExtrasV2::of(plan);
    let binned = PlanExtrasV3::of(plan);
    if binned != PlanExtrasV3::default() {
        envelope(FORMAT, Kind::Plan, &(wire, extras, binned))
    } else if extras != PlanExtrasV2::default() {
        envelope(FORMAT_2, Kind::Plan, &(wire, extras))
    } else {
        envelope(FORMAT_1, Kind::Plan, &wire)
    }
}

/// The saved state of a model.
pub(crate) fn encode_model(model: &Model) -> Result<Vec<u8>> {
    envelope(FORMAT_1, Kind::Model, &ModelV1::from_model(model))
}

fn envelope<T: Serialize>(format: u32, kind: Kind, body: &T) -> Result<Vec<u8>> {
    let mut payload = Vec::new();
    payload.extend_from_slice(&format.to_le_bytes());
    payload.push(kind as u8);
    payload.push(WRITER.len() as u8);
    payload.extend_from_slice(WRITER.as_bytes());
    bincode::serde::encode_into_std_write(body, &mut payload, bincode::config::standard())
        .map_err(|e| Error::input(format!("cannot serialise the {kind:?}: {e}")))?;
    Ok(encode_frame(MAGIC, &payload))
}

/// A fit's plan, from the saved state of a plan (format 0 or 1).
pub(crate) fn decode_plan(bytes: &[u8]) -> Result<Plan> {
    match decode(bytes)? {
        Saved::Plan(plan) => Ok(plan),
        Saved::Model(_) => Err(Error::input(
            "these bytes hold a model, not the plan of a fit",
        )),
    }
}

/// A model, from the saved state of a model or of a plan.
pub(crate) fn decode_model(bytes: &[u8]) -> Result<Model> {
    decode(bytes).and_then(Saved::into_model)
}

/// The format of saved bytes as their header says (0 for unframed bytes,
/// the plans of wispack 0.1.0); not a check that they decode.
pub(crate) fn format_of(bytes: &[u8]) -> u32 {
    let start = crate::codec::frame_header_bytes(MAGIC);
    match bytes.get(start..start + 4) {
        Some(format) if bytes.starts_with(MAGIC) => {
            u32::from_le_bytes(format.try_into().unwrap_or_default())
        }
        _ => 0,
    }
}

/// Decodes any saved state, checking its frame, format and invariants.
pub(crate) fn decode(bytes: &[u8]) -> Result<Saved> {
    if !bytes.starts_with(MAGIC) {
        // Older than the frame: wispack 0.1.0 kept the plan's raw bincode.
        return legacy::decode_plan(bytes).map(Saved::Plan);
    }
    let (payload, end) = frame_payload(MAGIC, bytes, MAX_PAYLOAD_BYTES).map_err(|e| {
        Error::corrupt(format!(
            "the saved state is damaged: {}",
            match e {
                FrameError::Truncated => "it is cut short".to_string(),
                other => other.to_string(),
            }
        ))
    })?;
    if end != bytes.len() {
        return Err(Error::corrupt(format!(
            "the saved state is damaged: {} bytes follow its end",
            bytes.len() - end
        )));
    }
    let header = Header::read(payload)?;
    if header.format > FORMAT || header.format == 0 {
        return Err(Error::input(format!(
            "this fit was saved by wispack {} in format {}, which this wispack ({WRITER}) \
             cannot read (it reads formats up to {FORMAT}); update wispack to use it",
            header.writer, header.format
        )));
    }
    let body = &payload[header.length..];
    match header.kind {
        k if k == Kind::Plan as u8 => {
            let (wire, extras, binned): (PlanV1, PlanExtrasV2, PlanExtrasV3) = match header.format {
                FORMAT_1 => {
                    let wire = decode_exact(body, "the saved plan").map_err(Error::corrupt)?;
                    (wire, PlanExtrasV2::default(), PlanExtrasV3::default())
                }
                FORMAT_2 => {
                    let (wire, extras) =
                        decode_exact(body, "the saved plan").map_err(Error::corrupt)?;
                    (wire, extras, PlanExtrasV3::default())
                }
                _ => decode_exact(body, "the saved plan").map_err(Error::corrupt)?,
            };
            extras
                .apply(wire.into_plan(binned.token_exposures)?)
                .map(Saved::Plan)
        }
        k if k == Kind::Model as u8 => {
            let wire: ModelV1 = decode_exact(body, "the saved model").map_err(Error::corrupt)?;
            wire.into_model().map(Saved::Model)
        }
        other => Err(Error::corrupt(format!(
            "the saved state is damaged: unknown kind {other}"
        ))),
    }
}

/// The header at the start of a payload.
struct Header {
    format: u32,
    kind: u8,
    writer: String,
    /// Bytes the header takes.
    length: usize,
}

impl Header {
    fn read(payload: &[u8]) -> Result<Self> {
        let damaged = || Error::corrupt("the saved state is damaged: its header is cut short");
        let format = u32::from_le_bytes(
            payload
                .get(..4)
                .ok_or_else(damaged)?
                .try_into()
                .map_err(|_| damaged())?,
        );
        let kind = *payload.get(4).ok_or_else(damaged)?;
        let writer_length = usize::from(*payload.get(5).ok_or_else(damaged)?);
        let writer = payload.get(6..6 + writer_length).ok_or_else(damaged)?;
        Ok(Self {
            format,
            kind,
            writer: String::from_utf8_lossy(writer).into_owned(),
            length: 6 + writer_length,
        })
    }
}

/// Re-frames a saved state whose payload was changed, with a correct
/// checksum: for tests that damage the payload past the checksum.
#[cfg(any(test, feature = "test-hooks"))]
pub(crate) fn reseal(bytes: &[u8]) -> Result<Vec<u8>> {
    let header = crate::codec::frame_header_bytes(MAGIC);
    if !bytes.starts_with(MAGIC) || bytes.len() < header {
        return Err(Error::input("not a framed saved state"));
    }
    Ok(encode_frame(MAGIC, &bytes[header..]))
}

// ---------------------------------------------------------------------------
// Format 1

// Built once per encode or decode, so the size of its larger variant costs
// nothing worth a box (boxing would not change the bytes either).
#[allow(clippy::large_enum_variant)]
#[derive(Serialize, Deserialize)]
enum PlanV1 {
    WarpedSigmoid(WarpedSigmoidPlanV1),
    Count(Box<nb_wire::CountPlanV1>),
}

/// What format 2 adds to a plan.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
struct PlanExtrasV2 {
    /// A count fit's fixed dispersion (`None`: estimated, or not a count fit).
    fixed_dispersion: Option<f64>,
    /// The treatments (columns of W) whose effects a reduced count model
    /// holds at 0 (empty for a full model and the original likelihood).
    held_effects: Vec<usize>,
}

impl PlanExtrasV2 {
    fn of(plan: &Plan) -> Self {
        match plan {
            Plan::Count(plan) => PlanExtrasV2 {
                fixed_dispersion: plan.settings.fixed_dispersion,
                held_effects: plan.model.held_effects().to_vec(),
            },
            Plan::WarpedSigmoid(_) => PlanExtrasV2::default(),
        }
    }

    fn apply(self, mut plan: Plan) -> Result<Plan> {
        let damaged = |e: String| Error::corrupt(format!("the saved state is damaged: {e}"));
        match &mut plan {
            Plan::Count(count) => {
                count.settings.fixed_dispersion = self.fixed_dispersion;
                count.settings.validate().map_err(damaged)?;
                if !self.held_effects.is_empty() {
                    count.model = count
                        .model
                        .clone()
                        .with_held_effects(self.held_effects)
                        .map_err(damaged)?;
                }
            }
            Plan::WarpedSigmoid(_)
                if self.fixed_dispersion.is_some() || !self.held_effects.is_empty() =>
            {
                return Err(Error::corrupt(
                    "the saved state is damaged: a fixed dispersion or held effects in a plan \
                     of the original likelihood",
                ));
            }
            Plan::WarpedSigmoid(_) => {}
        }
        Ok(plan)
    }
}

/// What format 3 adds to a plan.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
struct PlanExtrasV3 {
    /// The exposure of every token of a count fit of a binned table (empty
    /// otherwise).
    token_exposures: Vec<f64>,
}

impl PlanExtrasV3 {
    fn of(plan: &Plan) -> Self {
        match plan {
            Plan::Count(plan) => PlanExtrasV3 {
                token_exposures: plan.model.table().token_exposures().to_vec(),
            },
            Plan::WarpedSigmoid(_) => PlanExtrasV3::default(),
        }
    }
}

#[derive(Serialize, Deserialize)]
struct WarpedSigmoidPlanV1 {
    model: ModelV1,
    /// Per curve (c·S + s), per treatment, the detected change points.
    change_points: Vec<Vec<Vec<f64>>>,
    fit: FitSettingsV1,
    rise_threshold_factor: f64,
}

#[derive(Serialize, Deserialize)]
struct ModelV1 {
    contexts: Vec<String>,
    species: Vec<String>,
    ran_levels: Vec<String>,
    factors: Vec<FactorV1>,
    /// Degree of every curve, context-major.
    degrees: Vec<usize>,
    bins: usize,
    round_population_counts: bool,
    /// The summed-table row of every token (`None`: in no row).
    token_rows: Vec<Option<usize>>,
    token_counts: Vec<f64>,
    warp_precision: f64,
    buffer_factor: f64,
    max_penalty_at_distance_factor: f64,
}

#[derive(Serialize, Deserialize)]
struct FactorV1 {
    name: String,
    levels: Vec<String>,
    is_time_series: bool,
}

#[derive(Serialize, Deserialize)]
struct FitSettingsV1 {
    ctol: f64,
    max_evals: usize,
    memory: usize,
}

impl ModelV1 {
    fn from_model(model: &Model) -> Self {
        let design = model.design();
        let table = model.table();
        let settings = model.settings();
        Self {
            contexts: design.contexts().to_vec(),
            species: design.species().to_vec(),
            ran_levels: design.ran_levels().to_vec(),
            factors: design
                .factors()
                .iter()
                .map(|f| FactorV1 {
                    name: f.name.clone(),
                    levels: f.levels.clone(),
                    is_time_series: f.is_time_series,
                })
                .collect(),
            degrees: model.structure().degrees().to_vec(),
            bins: table.bins(),
            round_population_counts: table.round_population_counts(),
            token_rows: table.token_rows(),
            token_counts: table.token_counts().to_vec(),
            warp_precision: settings.warp_precision,
            buffer_factor: settings.buffer_factor,
            max_penalty_at_distance_factor: settings.max_penalty_at_distance_factor,
        }
    }

    fn into_model(self) -> Result<Model> {
        let factors = self
            .factors
            .into_iter()
            .map(|f| Factor {
                name: f.name,
                levels: f.levels,
                is_time_series: f.is_time_series,
            })
            .collect();
        let settings = Settings {
            warp_precision: self.warp_precision,
            buffer_factor: self.buffer_factor,
            max_penalty_at_distance_factor: self.max_penalty_at_distance_factor,
        };
        rebuild_model(
            Design::new(self.contexts, self.species, self.ran_levels, factors),
            self.degrees,
            self.bins,
            self.round_population_counts,
            &self.token_rows,
            self.token_counts,
            settings,
        )
    }
}

/// A model from what it is made of, every invariant checked; problems are
/// [`crate::error::ErrorKind::Corrupt`] errors.
fn rebuild_model(
    design: std::result::Result<Design, String>,
    degrees: Vec<usize>,
    bins: usize,
    round_population_counts: bool,
    token_rows: &[Option<usize>],
    token_counts: Vec<f64>,
    settings: Settings,
) -> Result<Model> {
    let invalid = |reason: String| Error::corrupt(format!("the saved model is invalid: {reason}"));
    let design = design.map_err(invalid)?;
    let shape = TableShape {
        bins,
        contexts: design.contexts().len(),
        species: design.species().len(),
        ran_levels: design.ran_levels().len(),
        treatments: design.treatment_count(),
    };
    if bins > crate::rules::MAX_BINS {
        return Err(invalid(format!("{bins} bins")));
    }
    let structure = Structure::new(shape.contexts, shape.species, degrees).map_err(invalid)?;
    let table =
        SummedTable::from_token_rows(shape, round_population_counts, token_rows, token_counts)
            .map_err(invalid)?;
    Model::new(table, design, structure, settings).map_err(invalid)
}

/// Checks what a plan adds to its model: change points for every curve and
/// treatment, as many as the curve's degree, finite; valid settings.
fn check_plan(plan: &WarpedSigmoidPlan) -> Result<()> {
    let invalid = |reason: String| Error::corrupt(format!("the saved plan is invalid: {reason}"));
    let model = &plan.model;
    let structure = model.structure();
    let treatments = model.design().treatment_count();
    if &plan.detected.structure != structure {
        return Err(invalid("its change points are for other degrees".into()));
    }
    if plan.detected.change_points.len() != structure.degrees().len() {
        return Err(invalid(format!(
            "change points for {} curves, the model has {}",
            plan.detected.change_points.len(),
            structure.degrees().len()
        )));
    }
    for (curve, (points, &degree)) in plan
        .detected
        .change_points
        .iter()
        .zip(structure.degrees())
        .enumerate()
    {
        if points.len() != treatments
            || points
                .iter()
                .any(|p| p.len() != degree || p.iter().any(|v| !v.is_finite()))
        {
            return Err(invalid(format!(
                "curve {curve} needs {degree} finite change points for each of {treatments} treatments"
            )));
        }
    }
    plan.settings.validate().map_err(invalid)
}

impl WarpedSigmoidPlanV1 {
    fn from_plan(plan: &WarpedSigmoidPlan) -> Self {
        let fit = plan.settings.fit;
        Self {
            model: ModelV1::from_model(&plan.model),
            change_points: plan.detected.change_points.clone(),
            fit: FitSettingsV1 {
                ctol: fit.ctol,
                max_evals: fit.max_evals,
                memory: fit.memory,
            },
            rise_threshold_factor: plan.settings.start.rise_threshold_factor,
        }
    }
}

impl PlanV1 {
    /// The plan; `token_exposures` are format 3's (empty before it).
    fn into_plan(self, token_exposures: Vec<f64>) -> Result<Plan> {
        let wire = match self {
            PlanV1::WarpedSigmoid(_) if !token_exposures.is_empty() => {
                return Err(Error::corrupt(
                    "the saved state is damaged: token exposures in a plan of the original \
                     likelihood",
                ))
            }
            PlanV1::WarpedSigmoid(wire) => wire,
            PlanV1::Count(wire) => return wire.into_plan(token_exposures).map(Plan::Count),
        };
        let model = wire.model.into_model()?;
        let plan = WarpedSigmoidPlan {
            detected: DetectedChangePoints {
                structure: model.structure().clone(),
                change_points: wire.change_points,
            },
            model,
            settings: PipelineSettings {
                start: StartSettings {
                    rise_threshold_factor: wire.rise_threshold_factor,
                },
                fit: FitSettings {
                    ctol: wire.fit.ctol,
                    max_evals: wire.fit.max_evals,
                    memory: wire.fit.memory,
                },
            },
        };
        check_plan(&plan)?;
        Ok(Plan::WarpedSigmoid(plan))
    }
}

// ---------------------------------------------------------------------------
// Format 0

/// Plans saved by wispack 0.1.0 before format 1: raw bincode of its
/// in-memory `BootstrapPlan`, frozen here field by field. Only the primary
/// parts are used; what was derived from them is rebuilt and checked as for
/// format 1. These bytes carry no checksum, so the invariants are all that
/// stands between damaged bytes and the model.
mod legacy {
    use super::*;

    #[derive(Deserialize)]
    struct PlanV0 {
        model: ModelV0,
        detected: DetectedV0,
        fit: FitSettingsV1,
    }

    #[derive(Deserialize)]
    #[allow(dead_code)] // derived parts are read past, then rebuilt
    struct ModelV0 {
        table: TableV0,
        design: DesignV0,
        structure: StructureV0,
        settings: SettingsV0,
        layout: LayoutV0,
    }

    #[derive(Deserialize)]
    #[allow(dead_code)]
    struct TableV0 {
        shape: ShapeV0,
        ran_blocks: usize,
        round_population_counts: bool,
        count: Vec<f64>,
        count_log: Vec<f64>,
        observed: Vec<bool>,
        pool_starts: Vec<usize>,
        pool_tokens: Vec<usize>,
        token_counts: Vec<f64>,
        dispersion: Vec<f64>,
    }

    #[derive(Deserialize)]
    struct ShapeV0 {
        bins: usize,
        contexts: usize,
        species: usize,
        ran_levels: usize,
        treatments: usize,
    }

    #[derive(Deserialize)]
    #[allow(dead_code)]
    struct DesignV0 {
        contexts: Vec<String>,
        species: Vec<String>,
        ran_levels: Vec<String>,
        factors: Vec<FactorV1>,
        treatments: Vec<(String, Vec<usize>)>,
        weights: Vec<f64>,
        treatment_by_code: Vec<usize>,
        level_strides: Vec<usize>,
    }

    #[derive(Deserialize)]
    struct StructureV0 {
        contexts: usize,
        species: usize,
        degrees: Vec<usize>,
    }

    #[derive(Deserialize)]
    struct SettingsV0 {
        warp_precision: f64,
        buffer_factor: f64,
        max_penalty_at_distance_factor: f64,
    }

    #[derive(Deserialize)]
    #[allow(dead_code)]
    struct LayoutV0 {
        contexts: usize,
        species: usize,
        treatments: usize,
        ran_blocks: usize,
        degrees: Vec<usize>,
        beta_starts: Vec<[Option<usize>; 3]>,
        warp_start: usize,
        len: usize,
    }

    #[derive(Deserialize)]
    struct DetectedV0 {
        structure: StructureV0,
        change_points: Vec<Vec<Vec<f64>>>,
    }

    /// The start-value setting 0.1.0 had built in.
    const RISE_THRESHOLD_FACTOR_V0: f64 = 0.8;

    pub(super) fn decode_plan(bytes: &[u8]) -> Result<Plan> {
        let wire: PlanV0 = decode_exact(bytes, "the plan").map_err(|e| {
            Error::corrupt(format!(
                "the saved plan is neither a wispack saved state nor a plan of wispack \
                 0.1.0 ({e}); it is damaged: refit with wisp()"
            ))
        })?;
        let invalid = |reason: String| {
            Error::corrupt(format!(
                "the saved plan (wispack 0.1.0) is invalid: {reason}"
            ))
        };
        let PlanV0 {
            model,
            detected,
            fit,
        } = wire;
        let ModelV0 {
            table,
            design,
            structure,
            settings,
            ..
        } = model;
        let design = Design::new(design.contexts, design.species, design.ran_levels, {
            design
                .factors
                .into_iter()
                .map(|f| Factor {
                    name: f.name,
                    levels: f.levels,
                    is_time_series: f.is_time_series,
                })
                .collect()
        });
        if let Ok(design) = &design {
            let shape = &table.shape;
            let sizes = [
                (shape.contexts, design.contexts().len()),
                (shape.species, design.species().len()),
                (shape.ran_levels, design.ran_levels().len()),
                (shape.treatments, design.treatment_count()),
                (structure.contexts, design.contexts().len()),
                (structure.species, design.species().len()),
            ];
            if sizes.iter().any(|(a, b)| a != b) {
                return Err(invalid("its table, design and degrees disagree".into()));
            }
        }
        let token_rows = token_rows_from_pools(
            &table.pool_starts,
            &table.pool_tokens,
            table.token_counts.len(),
        )
        .map_err(invalid)?;
        let model = rebuild_model(
            design,
            structure.degrees,
            table.shape.bins,
            table.round_population_counts,
            &token_rows,
            table.token_counts,
            Settings {
                warp_precision: settings.warp_precision,
                buffer_factor: settings.buffer_factor,
                max_penalty_at_distance_factor: settings.max_penalty_at_distance_factor,
            },
        )?;
        if detected.structure.degrees != model.structure().degrees()
            || detected.structure.contexts != model.structure().contexts()
            || detected.structure.species != model.structure().species()
        {
            return Err(invalid("its change points are for other degrees".into()));
        }
        let plan = WarpedSigmoidPlan {
            detected: DetectedChangePoints {
                structure: model.structure().clone(),
                change_points: detected.change_points,
            },
            model,
            settings: PipelineSettings {
                start: StartSettings {
                    rise_threshold_factor: RISE_THRESHOLD_FACTOR_V0,
                },
                fit: FitSettings {
                    ctol: fit.ctol,
                    max_evals: fit.max_evals,
                    memory: fit.memory,
                },
            },
        };
        check_plan(&plan)?;
        Ok(Plan::WarpedSigmoid(plan))
    }

    /// The row of every token from pools (`pool_tokens[pool_starts[r]..
    /// pool_starts[r + 1]]` are row r's tokens), checking that they are
    /// well formed and hold every token at most once.
    fn token_rows_from_pools(
        pool_starts: &[usize],
        pool_tokens: &[usize],
        tokens: usize,
    ) -> std::result::Result<Vec<Option<usize>>, String> {
        if pool_starts.first() != Some(&0)
            || pool_starts.last() != Some(&pool_tokens.len())
            || pool_starts.windows(2).any(|w| w[1] < w[0])
        {
            return Err("its token pools are malformed".into());
        }
        let mut rows = vec![None; tokens];
        for (row, bounds) in pool_starts.windows(2).enumerate() {
            for &token in &pool_tokens[bounds[0]..bounds[1]] {
                match rows.get_mut(token) {
                    Some(slot @ None) => *slot = Some(row),
                    _ => return Err(format!("token {token} is pooled twice or does not exist")),
                }
            }
        }
        Ok(rows)
    }
}

mod nb_wire;

#[cfg(test)]
mod tests;
