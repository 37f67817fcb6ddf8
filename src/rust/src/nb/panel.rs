//! A panel fitted species by species: what `wisp()` runs for a checkpoint
//! or on a `future` plan. Under the default structure selection (model
//! vignette §12.6) and fit (§13.2) the species are independent: a species'
//! curves are chosen, pooled, chosen again and fitted from its own rows and
//! its own animals' warps. So one species' whole pipeline is a task of its
//! own ([`SpeciesTask::fit`]), and its result ([`SpeciesWork`]) can be kept
//! in a checkpoint, computed in another process or on another machine, and
//! put together with the others ([`assemble`]) into exactly the fit that the
//! whole panel at once gives.
//!
//! A task travels as checksummed bytes ([`SpeciesTask::encode`]): the summed
//! rows of its species (not their tokens), the design, the degrees the user
//! fixed and the fit settings. Its fingerprint ([`SpeciesTask::fingerprint`])
//! keys the checkpoint, so a checkpoint of other data or settings is refused.

use super::degrees::{has_second_pass, select_structure_passes, StructureChoice};
use super::fit::SpeciesFit;
use super::pipeline::{fit_one, fit_species_on, CountEstimate, CountPlan};
use super::select::CurveSelection;
use super::settings::CountFitSettings;
use super::table::{CountTable, Exposure};
use super::CountModel;
use crate::changepoint::DetectedChangePoints;
use crate::checkpoint::Record;
use crate::codec::{decode_exact, encode_frame, fnv1a64, frame_payload};
use crate::data::TableShape;
use crate::design::{Design, Factor, Structure};
use crate::engine::PoolOptions;
use crate::error::Error;
use serde::{Deserialize, Serialize};

/// What one species' structure selection and fit found.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub(crate) struct SpeciesWork {
    /// The species' label.
    pub species: String,
    /// Per context, the curve's selection (its `species` is 0: the task's own).
    pub selections: Vec<CurveSelection>,
    /// Per context, per treatment: the change points that start its fit.
    pub change_points: Vec<Vec<Vec<f64>>>,
    /// The fit (its `species` is 0).
    pub fit: SpeciesFit,
}

/// A species' work as a checkpoint keeps it: with the fingerprint of the
/// panel's task it belongs to.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub(crate) struct SpeciesRecord {
    pub task: u64,
    pub work: SpeciesWork,
}

impl Record for SpeciesRecord {
    const FILE_MAGIC: &'static [u8; 8] = crate::checkpoint::FIT_FILE_MAGIC;
    const OLDER_MAGICS: &'static [(&'static [u8; 8], &'static str)] = &[];
    const FRAME_MAGIC: &'static [u8; 4] = b"WFTF";
    const KIND: &'static str = crate::checkpoint::FIT_KIND;
}

/// `value` in bincode inside a checksummed frame of `magic` (`what` names it
/// in errors): how tasks and works travel to other processes and back.
pub(crate) fn framed<T: Serialize>(
    magic: &[u8; 4],
    value: &T,
    what: &str,
) -> Result<Vec<u8>, Error> {
    let payload = bincode::serde::encode_to_vec(value, bincode::config::standard())
        .map_err(|e| Error::system(format!("cannot encode {what}: {e}")))?;
    Ok(encode_frame(magic, &payload))
}

/// The value in the frame of `magic` that is all of `bytes` ([`framed`]).
pub(crate) fn unframed<T: serde::de::DeserializeOwned>(
    magic: &[u8; 4],
    bytes: &[u8],
    what: &str,
) -> Result<T, Error> {
    let invalid = |reason: String| Error::corrupt(format!("{what} is invalid: {reason}"));
    let (payload, end) =
        frame_payload(magic, bytes, u64::MAX).map_err(|e| invalid(e.to_string()))?;
    if end != bytes.len() {
        return Err(invalid("bytes after its end".into()));
    }
    decode_exact(payload, what).map_err(invalid)
}

/// The panel's species (or some of them) with everything their fits need.
#[derive(Clone, Debug)]
pub(crate) struct SpeciesTask {
    /// The data, design and held effects; its structure is not used.
    pub model: CountModel,
    /// Per curve (context-major), the degree the user fixed; empty: none.
    pub fixed: Vec<Option<usize>>,
    /// Whether the selection makes its second pass (decided for the whole
    /// panel: [`has_second_pass`]).
    pub second_pass: bool,
    pub settings: CountFitSettings,
}

const TASK_MAGIC: &[u8; 4] = b"WSPT";

#[derive(Serialize, Deserialize)]
struct SpeciesTaskWire {
    contexts: Vec<String>,
    species: Vec<String>,
    ran_levels: Vec<String>,
    factors: Vec<(String, Vec<String>, bool)>,
    bins: usize,
    point_gap: f64,
    exposure: String,
    observed: Vec<bool>,
    count: Vec<f64>,
    exposure_values: Vec<f64>,
    held_effects: Vec<usize>,
    fixed: Vec<Option<usize>>,
    second_pass: bool,
    settings: CountFitSettings,
}

fn exposure_named(name: &str) -> Result<Exposure, String> {
    [
        Exposure::Cells,
        Exposure::Tokens,
        Exposure::Unit,
        Exposure::Given,
    ]
    .into_iter()
    .find(|e| e.name() == name)
    .ok_or_else(|| format!("unknown exposure \"{name}\""))
}

impl SpeciesTask {
    /// The task of every species of `base` (a model as the fit builds it,
    /// before any structure is chosen).
    pub fn new(
        base: &CountModel,
        fixed: &[Option<usize>],
        settings: &CountFitSettings,
    ) -> Result<Self, String> {
        let shape = base.table().shape();
        if !fixed.is_empty() && fixed.len() != shape.contexts * shape.species {
            return Err(format!(
                "degrees needs {} entries, one per (context, species), not {}",
                shape.contexts * shape.species,
                fixed.len()
            ));
        }
        let table = base
            .table()
            .species_rows(&(0..shape.species).collect::<Vec<_>>())?;
        Ok(SpeciesTask {
            model: model_with_table(base, table, base.design().species().to_vec())?,
            fixed: fixed.to_vec(),
            second_pass: has_second_pass(base, fixed),
            settings: *settings,
        })
    }

    pub fn species(&self) -> &[String] {
        self.model.design().species()
    }

    /// The task of some of its species (indices, in the order given).
    pub fn restricted(&self, species: &[usize]) -> Result<Self, String> {
        let all = self.species();
        let labels = species
            .iter()
            .map(|&s| {
                all.get(s)
                    .cloned()
                    .ok_or_else(|| format!("there is no species {s} of {}", all.len()))
            })
            .collect::<Result<Vec<_>, _>>()?;
        let table = self.model.table().species_rows(species)?;
        let shape = self.model.table().shape();
        let fixed = if self.fixed.is_empty() {
            Vec::new()
        } else {
            (0..shape.contexts)
                .flat_map(|c| species.iter().map(move |&s| (c, s)))
                .map(|(c, s)| self.fixed[c * shape.species + s])
                .collect()
        };
        Ok(SpeciesTask {
            model: model_with_table(&self.model, table, labels)?,
            fixed,
            second_pass: self.second_pass,
            settings: self.settings,
        })
    }

    /// Chooses the structure of species `s` and fits it, in this process:
    /// the passes of [`select_structure_passes`] and the fit of
    /// [`fit_species_on`] for that species alone.
    pub fn fit(&self, s: usize) -> Result<SpeciesWork, Error> {
        let single = self.restricted(&[s]).map_err(Error::input)?;
        let serial = PoolOptions::default();
        let choice: StructureChoice = select_structure_passes(
            &single.model,
            &single.fixed,
            &self.settings,
            &serial,
            self.second_pass,
            || false,
            |_, _, _| {},
        )?;
        let model = single
            .model
            .with_structure(choice.detected.structure.clone())
            .map_err(Error::input)?;
        let estimate = fit_species_on(
            &model,
            &choice.detected,
            &choice.fitted,
            &self.settings,
            &serial,
            || false,
            |_, _| {},
        )?;
        let fit = estimate
            .species
            .into_iter()
            .next()
            .ok_or_else(|| Error::system("internal: a species fit is missing"))?;
        Ok(SpeciesWork {
            species: self.species()[s].clone(),
            selections: choice.selections,
            change_points: choice.detected.change_points,
            fit,
        })
    }

    /// The task as checksummed bytes.
    pub fn encode(&self) -> Result<Vec<u8>, Error> {
        let model = &self.model;
        let design = model.design();
        let table = model.table();
        let wire = SpeciesTaskWire {
            contexts: design.contexts().to_vec(),
            species: design.species().to_vec(),
            ran_levels: design.ran_levels().to_vec(),
            factors: design
                .factors()
                .iter()
                .map(|f| (f.name.clone(), f.levels.clone(), f.is_time_series))
                .collect(),
            bins: table.shape().bins,
            point_gap: model.point_gap(),
            exposure: table.exposure_kind().name().to_string(),
            observed: table.observed().to_vec(),
            count: table.all_counts().to_vec(),
            exposure_values: table.all_exposures().to_vec(),
            held_effects: model.held_effects().to_vec(),
            fixed: self.fixed.clone(),
            second_pass: self.second_pass,
            settings: self.settings,
        };
        framed(TASK_MAGIC, &wire, "a species task")
    }

    /// A task from [`Self::encode`]'s bytes, every shape checked.
    pub fn decode(bytes: &[u8]) -> Result<Self, Error> {
        let invalid =
            |reason: String| Error::corrupt(format!("the species task is invalid: {reason}"));
        let wire: SpeciesTaskWire = unframed(TASK_MAGIC, bytes, "the species task")?;
        let factors = wire
            .factors
            .into_iter()
            .map(|(name, levels, is_time_series)| Factor {
                name,
                levels,
                is_time_series,
            })
            .collect();
        let design =
            Design::new(wire.contexts, wire.species, wire.ran_levels, factors).map_err(invalid)?;
        if wire.bins == 0 || wire.bins > crate::rules::MAX_BINS {
            return Err(invalid(format!("{} bins", wire.bins)));
        }
        let shape = TableShape {
            bins: wire.bins,
            contexts: design.contexts().len(),
            species: design.species().len(),
            ran_levels: design.ran_levels().len(),
            treatments: design.treatment_count(),
        };
        let table = CountTable::from_sums(
            shape,
            exposure_named(&wire.exposure).map_err(invalid)?,
            wire.observed,
            wire.count,
            wire.exposure_values,
        )
        .map_err(invalid)?;
        let curves = shape.contexts * shape.species;
        if !wire.fixed.is_empty() && wire.fixed.len() != curves {
            return Err(invalid(format!(
                "{} fixed degrees for {curves} curves",
                wire.fixed.len()
            )));
        }
        wire.settings.validate().map_err(invalid)?;
        let structure =
            Structure::new(shape.contexts, shape.species, vec![0; curves]).map_err(invalid)?;
        let model = CountModel::new(table, design, structure, wire.point_gap)
            .and_then(|m| m.with_held_effects(wire.held_effects))
            .map_err(invalid)?;
        Ok(SpeciesTask {
            model,
            fixed: wire.fixed,
            second_pass: wire.second_pass,
            settings: wire.settings,
        })
    }

    /// The fingerprint of the task's bytes (a checkpoint's key).
    pub fn fingerprint(bytes: &[u8]) -> u64 {
        fnv1a64(&[bytes])
    }
}

/// `model`'s design and settings with another table of the species `labels`.
fn model_with_table(
    model: &CountModel,
    table: CountTable,
    labels: Vec<String>,
) -> Result<CountModel, String> {
    let design = model.design();
    let design = Design::new(
        design.contexts().to_vec(),
        labels,
        design.ran_levels().to_vec(),
        design.factors().to_vec(),
    )?;
    let shape = table.shape();
    let structure = Structure::new(
        shape.contexts,
        shape.species,
        vec![0; shape.contexts * shape.species],
    )?;
    CountModel::new(table, design, structure, model.point_gap())?
        .with_held_effects(model.held_effects().to_vec())
}

/// The structure step's result for the whole of `base` from the work of
/// each of its species (in any order; each species exactly once): the
/// selections, the degrees and change points, and every species' fit.
pub(crate) fn assemble(
    base: &CountModel,
    works: Vec<SpeciesWork>,
) -> Result<StructureChoice, String> {
    let shape = base.table().shape();
    let labels = base.design().species();
    let mut by_species: Vec<Option<SpeciesWork>> = vec![None; shape.species];
    for work in works {
        let s = labels
            .iter()
            .position(|l| *l == work.species)
            .ok_or_else(|| format!("the fit of species {} is not of this panel", work.species))?;
        if work.selections.len() != shape.contexts || work.change_points.len() != shape.contexts {
            return Err(format!(
                "the fit of species {} has {} contexts, the panel {}",
                work.species,
                work.selections.len(),
                shape.contexts
            ));
        }
        if by_species[s].replace(work).is_some() {
            return Err(format!("species {} was fitted twice", labels[s]));
        }
    }
    let works = by_species
        .into_iter()
        .enumerate()
        .map(|(s, w)| w.ok_or_else(|| format!("species {} has no fit", labels[s])))
        .collect::<Result<Vec<_>, _>>()?;
    let mut selections = Vec::with_capacity(shape.contexts * shape.species);
    let mut degrees = Vec::with_capacity(shape.contexts * shape.species);
    let mut change_points = Vec::with_capacity(shape.contexts * shape.species);
    for c in 0..shape.contexts {
        for (s, work) in works.iter().enumerate() {
            let mut selection = work.selections[c].clone();
            if selection.context != c {
                return Err(format!(
                    "the fit of species {} lists its contexts out of order",
                    work.species
                ));
            }
            selection.species = s;
            degrees.push(selection.degree());
            selections.push(selection);
            change_points.push(work.change_points[c].clone());
        }
    }
    let fitted = works
        .into_iter()
        .enumerate()
        .map(|(s, work)| {
            let mut fit = work.fit;
            fit.species = s;
            Some(fit)
        })
        .collect();
    Ok(StructureChoice {
        detected: DetectedChangePoints {
            structure: Structure::new(shape.contexts, shape.species, degrees)?,
            change_points,
        },
        selections,
        fitted,
    })
}

/// The gene-level tests' reduced fits (model vignette §15.4) for some
/// species of a full fit: each term's effects held at 0 on top of what the
/// fit holds, every species started from its full fit, as
/// [`super::terms::fit_with_held`] does for all species at once. What one
/// future of `wisp_gene_tests(backend = "future")` receives.
#[derive(Clone, Debug)]
pub(crate) struct TermTask {
    /// The species' rows and design (their structure is the full fit's).
    model: CountModel,
    detected: DetectedChangePoints,
    estimate: CountEstimate,
    settings: CountFitSettings,
}

/// One species' reduced fit of one term.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct ReducedFit {
    /// −ℓ of the reduced fit (NaN when it failed).
    pub negative_log_likelihood: f64,
    /// −ℓ of the full fit.
    pub full_negative_log_likelihood: f64,
    pub converged: bool,
    /// Why the fit stopped ("" when it converged), as the fit reports it.
    pub stop: String,
    /// Why the fit failed ("" when it did not).
    pub failure: String,
}

const TERM_TASK_MAGIC: &[u8; 4] = b"WSPR";

#[derive(Serialize, Deserialize)]
struct TermTaskWire {
    species: Vec<u8>,
    degrees: Vec<usize>,
    change_points: Vec<Vec<Vec<f64>>>,
    estimate: Vec<SpeciesFit>,
}

impl TermTask {
    /// The task of species `species` (indices, in the order given) of a full fit.
    pub fn from_plan(plan: &CountPlan, species: &[usize]) -> Result<Self, String> {
        let full = &plan.model;
        let shape = full.table().shape();
        let labels = species
            .iter()
            .map(|&s| {
                full.design()
                    .species()
                    .get(s)
                    .cloned()
                    .ok_or_else(|| format!("there is no species {s} of {}", shape.species))
            })
            .collect::<Result<Vec<_>, _>>()?;
        let table = full.table().species_rows(species)?;
        let curves = |c: usize| species.iter().map(move |&s| c * shape.species + s);
        let degrees: Vec<usize> = (0..shape.contexts)
            .flat_map(curves)
            .map(|curve| full.structure().degrees()[curve])
            .collect();
        let change_points = (0..shape.contexts)
            .flat_map(curves)
            .map(|curve| plan.detected.change_points[curve].clone())
            .collect();
        let structure = Structure::new(shape.contexts, species.len(), degrees)?;
        let model = model_with_table(full, table, labels)?.with_structure(structure.clone())?;
        let estimate = species
            .iter()
            .enumerate()
            .map(|(local, &s)| {
                let mut fit = plan.estimate.species[s].clone();
                fit.species = local;
                fit
            })
            .collect();
        Ok(TermTask {
            model,
            detected: DetectedChangePoints {
                structure,
                change_points,
            },
            estimate: CountEstimate { species: estimate },
            settings: plan.settings,
        })
    }

    pub fn model(&self) -> &CountModel {
        &self.model
    }

    /// Per term (effects, columns of W), per species: its reduced fit.
    pub fn fit_terms(&self, terms: &[Vec<usize>]) -> Result<Vec<Vec<ReducedFit>>, String> {
        terms
            .iter()
            .map(|held| {
                if held.is_empty() {
                    return Err("a term to test holds at least one effect".to_string());
                }
                let mut treatments = self.model.held_effects().to_vec();
                treatments.extend_from_slice(held);
                let model = self.model.clone().with_held_effects(treatments)?;
                Ok(self
                    .estimate
                    .species
                    .iter()
                    .enumerate()
                    .map(|(s, full)| {
                        if full.has_failed() {
                            return ReducedFit {
                                negative_log_likelihood: f64::NAN,
                                full_negative_log_likelihood: full.negative_log_likelihood,
                                converged: false,
                                stop: full.stop.clone().unwrap_or_default(),
                                failure: super::terms::failed_full_fit(full),
                            };
                        }
                        let fitted = fit_one(
                            &model,
                            s,
                            Some(&self.detected),
                            Some(&self.estimate),
                            &self.settings,
                        );
                        match fitted {
                            Ok(fit) => ReducedFit {
                                negative_log_likelihood: fit.negative_log_likelihood,
                                full_negative_log_likelihood: full.negative_log_likelihood,
                                converged: fit.converged,
                                stop: fit.stop.unwrap_or_default(),
                                failure: String::new(),
                            },
                            // As the whole fit's tests report it: the full
                            // fit kept in its place.
                            Err(reason) => ReducedFit {
                                negative_log_likelihood: f64::NAN,
                                full_negative_log_likelihood: full.negative_log_likelihood,
                                converged: false,
                                stop: full.stop.clone().unwrap_or_default(),
                                failure: reason,
                            },
                        }
                    })
                    .collect())
            })
            .collect()
    }

    /// The task as checksummed bytes.
    pub fn encode(&self) -> Result<Vec<u8>, Error> {
        let species = SpeciesTask {
            model: self.model.clone(),
            fixed: Vec::new(),
            second_pass: false,
            settings: self.settings,
        };
        let wire = TermTaskWire {
            species: species.encode()?,
            degrees: self.model.structure().degrees().to_vec(),
            change_points: self.detected.change_points.clone(),
            estimate: self.estimate.species.clone(),
        };
        framed(TERM_TASK_MAGIC, &wire, "a term task")
    }

    /// A task from [`Self::encode`]'s bytes, its shapes checked.
    pub fn decode(bytes: &[u8]) -> Result<Self, Error> {
        let invalid =
            |reason: String| Error::corrupt(format!("the term task is invalid: {reason}"));
        let wire: TermTaskWire = unframed(TERM_TASK_MAGIC, bytes, "the term task")?;
        let species = SpeciesTask::decode(&wire.species)?;
        let shape = species.model.table().shape();
        let structure =
            Structure::new(shape.contexts, shape.species, wire.degrees).map_err(invalid)?;
        let model = species
            .model
            .with_structure(structure.clone())
            .map_err(invalid)?;
        let shapes_agree = wire.change_points.len() == shape.contexts * shape.species
            && wire
                .change_points
                .iter()
                .zip(structure.degrees())
                .all(|(per_treatment, &d)| {
                    per_treatment.len() == shape.treatments
                        && per_treatment.iter().all(|p| p.len() == d)
                })
            && wire.estimate.len() == shape.species
            && wire.estimate.iter().enumerate().all(|(s, f)| {
                let curves = shape.contexts * shape.treatments;
                f.species == s
                    && f.state.theta.len() == curves
                    && f.curve_informed.len() == curves
                    && f.state.theta.iter().zip(&f.curve_informed).enumerate().all(
                        |(curve, (theta, informed))| {
                            let degree = structure.degree(curve / shape.treatments, s);
                            theta.len() == super::curve::curve_len(degree)
                                && informed.len() == theta.len()
                        },
                    )
                    && f.state.rho.len() == shape.contexts
                    && f.rho_informed.len() == shape.contexts
                    && f.state.u.len() == shape.ran_levels
            });
        if !shapes_agree {
            return Err(invalid(
                "its change points or fits do not match its species".into(),
            ));
        }
        Ok(TermTask {
            model,
            detected: DetectedChangePoints {
                structure,
                change_points: wire.change_points,
            },
            estimate: CountEstimate {
                species: wire.estimate,
            },
            settings: species.settings,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::super::degrees::select_structure;
    use super::super::pipeline::fit_count;
    use super::super::tests_support::{simulate, Simulation};
    use super::*;

    fn bytes<T: Serialize>(value: &T) -> Vec<u8> {
        bincode::serde::encode_to_vec(value, bincode::config::standard()).unwrap()
    }

    fn panel() -> CountModel {
        let spec = Simulation {
            bins: 40,
            contexts: 2,
            species: 3,
            degrees: vec![1, 0, 2, 1, 1, 0],
            cells_per_key: 5,
            ..Simulation::default()
        };
        simulate(&spec, 11).0
    }

    /// The fit `count_fit_rust` makes from a structure choice: the estimate's
    /// bytes and the reported values' bits.
    fn fit_of(model: &CountModel, choice: StructureChoice) -> (StructureChoice, Vec<u8>, Vec<u64>) {
        let (plan, outcome) = fit_count(
            std::time::Instant::now(),
            model,
            choice.detected.clone(),
            &choice.fitted,
            &CountFitSettings::default(),
            &PoolOptions::default(),
            || false,
            |_, _| {},
        )
        .unwrap();
        let parameters = outcome
            .fit
            .unwrap()
            .parameters
            .iter()
            .map(|p| p.to_bits())
            .collect();
        (choice, bytes(&plan.estimate), parameters)
    }

    /// The whole panel's structure choice and fit, as `count_fit_rust` makes them.
    fn whole(model: &CountModel, fixed: &[Option<usize>]) -> (StructureChoice, Vec<u8>, Vec<u64>) {
        let settings = CountFitSettings::default();
        let serial = PoolOptions::default();
        let choice =
            select_structure(model, fixed, &settings, &serial, || false, |_, _, _| {}).unwrap();
        fit_of(model, choice)
    }

    /// The same from each species fitted on its own, through encoded tasks
    /// of some species, the works handed over in another order.
    fn by_species(
        model: &CountModel,
        fixed: &[Option<usize>],
    ) -> (StructureChoice, Vec<u8>, Vec<u64>) {
        let task = SpeciesTask::new(model, fixed, &CountFitSettings::default()).unwrap();
        let task = SpeciesTask::decode(&task.encode().unwrap()).unwrap();
        let part =
            SpeciesTask::decode(&task.restricted(&[2, 0]).unwrap().encode().unwrap()).unwrap();
        let labels = model.design().species();
        assert_eq!(part.species(), &[labels[2].clone(), labels[0].clone()][..]);
        let works = vec![
            part.fit(1).unwrap(),
            task.fit(1).unwrap(),
            part.fit(0).unwrap(),
        ];
        fit_of(model, assemble(model, works).unwrap())
    }

    #[test]
    fn species_fitted_on_their_own_give_the_whole_panels_fit() {
        let model = panel();
        assert!(model.has_random_effects());
        // Chosen everywhere; and with species 1's degrees all fixed (its
        // second pass is the panel's, though it alone would need none).
        for fixed in [vec![], vec![None, Some(1), None, None, Some(0), None]] {
            let (expected, estimate, parameters) = whole(&model, &fixed);
            let (got, got_estimate, got_parameters) = by_species(&model, &fixed);
            assert_eq!(bytes(&got.selections), bytes(&expected.selections));
            assert_eq!(got.detected, expected.detected);
            assert_eq!(got_estimate, estimate);
            assert_eq!(got_parameters, parameters);
        }
    }

    #[test]
    fn every_species_must_be_fitted_once_and_damaged_tasks_are_refused() {
        let model = panel();
        let settings = CountFitSettings::default();
        let task = SpeciesTask::new(&model, &[], &settings).unwrap();
        let works: Vec<SpeciesWork> = (0..3).map(|s| task.fit(s).unwrap()).collect();
        let missing = assemble(&model, works[..2].to_vec()).unwrap_err();
        assert!(missing.contains("has no fit"), "{missing}");
        let twice = assemble(
            &model,
            vec![works[0].clone(), works[0].clone(), works[1].clone()],
        )
        .unwrap_err();
        assert!(twice.contains("fitted twice"), "{twice}");
        let mut stranger = works[2].clone();
        stranger.species = "not a gene".into();
        let foreign =
            assemble(&model, vec![works[0].clone(), works[1].clone(), stranger]).unwrap_err();
        assert!(foreign.contains("not of this panel"), "{foreign}");
        assert!(SpeciesTask::new(&model, &[None; 5], &settings).is_err());
        assert!(task.restricted(&[3]).is_err());

        let encoded = task.encode().unwrap();
        for at in [0, 10, encoded.len() / 2, encoded.len() - 1] {
            let mut damaged = encoded.clone();
            damaged[at] ^= 0x40;
            assert!(SpeciesTask::decode(&damaged).is_err(), "byte {at}");
        }
        assert!(SpeciesTask::decode(&encoded[..encoded.len() - 1]).is_err());
        assert_eq!(
            SpeciesTask::fingerprint(&encoded),
            SpeciesTask::fingerprint(&task.encode().unwrap())
        );
        let other = SpeciesTask::new(&model, &[Some(1); 6], &settings)
            .unwrap()
            .encode()
            .unwrap();
        assert_ne!(
            SpeciesTask::fingerprint(&encoded),
            SpeciesTask::fingerprint(&other)
        );
    }

    #[test]
    fn a_fits_checkpoint_keeps_species_and_refuses_a_bootstraps() {
        let dir = std::env::temp_dir().join(format!("wispack-fitckp-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("fit.ckp");
        let model = panel();
        let task = SpeciesTask::new(&model, &[], &CountFitSettings::default()).unwrap();
        let record = SpeciesRecord {
            task: 7,
            work: task.fit(0).unwrap(),
        };
        crate::checkpoint::open_records::<SpeciesRecord>(&path).unwrap();
        crate::checkpoint::Appender::new(&path)
            .unwrap()
            .append(&record)
            .unwrap();
        let contents = crate::checkpoint::open_records::<SpeciesRecord>(&path).unwrap();
        assert_eq!(contents.entries, vec![record]);
        let as_bootstrap = crate::checkpoint::open(&path).unwrap_err().to_string();
        assert!(
            as_bootstrap.contains("is a fit's checkpoint, not a bootstrap's"),
            "{as_bootstrap}"
        );
        let bootstrap = dir.join("boot.ckp");
        crate::checkpoint::open(&bootstrap).unwrap();
        let as_fit = crate::checkpoint::open_records::<SpeciesRecord>(&bootstrap)
            .unwrap_err()
            .to_string();
        assert!(
            as_fit.contains("is a bootstrap's checkpoint, not a fit's"),
            "{as_fit}"
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn reduced_fits_of_some_species_are_those_of_the_whole_fit() {
        let full = super::super::tests_support::fitted_plan(8);
        let serial = PoolOptions::default();
        let whole =
            super::super::terms::fit_with_held(&full, &[1], &serial, || false, |_, _| {}).unwrap();
        let species = full.estimate.species.len();
        let order: Vec<usize> = (0..species).rev().collect();
        let task = TermTask::decode(
            &TermTask::from_plan(&full, &order)
                .unwrap()
                .encode()
                .unwrap(),
        )
        .unwrap();
        let reduced = task.fit_terms(&[vec![1]]).unwrap();
        for (local, &s) in order.iter().enumerate() {
            let got = &reduced[0][local];
            let expected = &whole.plan.estimate.species[s];
            assert_eq!(
                got.negative_log_likelihood.to_bits(),
                expected.negative_log_likelihood.to_bits()
            );
            assert_eq!(
                got.full_negative_log_likelihood.to_bits(),
                full.estimate.species[s].negative_log_likelihood.to_bits()
            );
            assert_eq!(got.converged, expected.converged);
            assert!(got.failure.is_empty());
        }
        assert!(task.fit_terms(&[vec![]]).is_err());
        assert!(TermTask::from_plan(&full, &[species]).is_err());
        let mut damaged = TermTask::from_plan(&full, &[0]).unwrap().encode().unwrap();
        let at = damaged.len() / 2;
        damaged[at] ^= 1;
        assert!(TermTask::decode(&damaged).is_err());
    }
}
