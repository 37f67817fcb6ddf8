//! The R boundary: argument conversion and error mapping only. The work lives
//! in the core modules below, which know nothing about R.

use extendr_api::prelude::*;
// extendr-api 0.9: the prelude no longer re-exports the `Result<T>` alias.
use extendr_api::Result;

pub mod bootstrap;
pub mod checkpoint;
pub mod codec;
pub(crate) mod count;
pub mod engine;
pub mod faults;
pub mod fit;
pub mod model;
pub mod pipeline;
pub(crate) mod sampling;
pub mod selftest;
pub mod streams;
pub mod structure;
#[cfg(test)]
mod test_rng;

use bootstrap::BootstrapPlan;
use engine::{Failure, PoolError, PoolOptions, TaskRecord};
use fit::{FitResult, FitSettings};
use model::{CodedTokens, Design, Factor, Model, Objective, ParameterRole, Settings};
use std::ffi::{c_int, c_void};
use std::time::Duration;
use structure::{DetectionMethod, DetectionSettings};

// Not exposed by extendr-ffi 0.9; both are exported by libR.
extern "C" {
    fn R_ToplevelExec(fun: Option<unsafe extern "C" fn(*mut c_void)>, data: *mut c_void) -> c_int;
    fn R_CheckUserInterrupt();
}

unsafe extern "C" fn check_interrupt_callback(_: *mut c_void) {
    R_CheckUserInterrupt();
}

/// True when the user pressed Ctrl-C. Inside `R_ToplevelExec` the longjmp of
/// `R_CheckUserInterrupt` stops there instead of unwinding through Rust frames.
fn user_interrupt_pending() -> bool {
    // SAFETY: called on R's main thread; the callback takes no data.
    unsafe { R_ToplevelExec(Some(check_interrupt_callback), std::ptr::null_mut()) == 0 }
}

fn input_error(message: impl Into<String>) -> Error {
    Error::Other(message.into())
}

fn seconds_option(seconds: f64, name: &str) -> Result<Option<Duration>> {
    if seconds.is_nan() || seconds <= 0.0 {
        Err(input_error(format!(
            "`{name}` must be a positive number of seconds (Inf for none)"
        )))
    } else if seconds.is_infinite() {
        Ok(None)
    } else {
        Ok(Some(Duration::from_secs_f64(seconds)))
    }
}

fn count_option(value: i32, name: &str) -> Result<usize> {
    usize::try_from(value)
        .ok()
        .filter(|&v| v >= 1)
        .ok_or_else(|| input_error(format!("`{name}` must be a whole number >= 1")))
}

/// Engine options from R values (`memory_limit_mb` NA means no limit).
fn pool_options(
    workers: i32,
    tasks_per_child: i32,
    schedule: &str,
    timeout: f64,
    memory_limit_mb: Option<f64>,
    retries: i32,
) -> Result<PoolOptions> {
    if memory_limit_mb.is_some_and(|limit| !(limit.is_finite() && limit > 0.0)) {
        return Err(input_error(
            "`memory_limit_mb` must be a positive number of MB or NA",
        ));
    }
    Ok(PoolOptions {
        workers: count_option(workers, "workers")?,
        tasks_per_child: count_option(tasks_per_child, "tasks_per_child")?,
        schedule: schedule.parse().map_err(input_error)?,
        timeout: seconds_option(timeout, "timeout")?,
        memory_limit_mb,
        retries: u32::try_from(retries).map_err(|_| input_error("`retries` must be >= 0"))?,
    })
}

/// The per-task columns every engine run reports, as named R vectors;
/// `value_summary` becomes the column after `reason`. `None` becomes NA.
fn record_columns<T>(records: &[TaskRecord<T>], value_summary: (&'static str, Robj)) -> List {
    fn column<T, U>(records: &[TaskRecord<T>], field: impl Fn(&TaskRecord<T>) -> U) -> Robj
    where
        Vec<U>: Into<Robj>,
    {
        records.iter().map(field).collect::<Vec<U>>().into()
    }
    List::from_pairs(vec![
        ("task", column(records, |r| r.task as i32)),
        ("ok", column(records, |r| r.outcome.is_ok())),
        (
            "reason",
            column(records, |r| {
                r.outcome.as_ref().err().map(Failure::to_string)
            }),
        ),
        value_summary,
        ("attempts", column(records, |r| r.attempts as i32)),
        ("pid", column(records, |r| r.pid)),
        ("seconds", column(records, |r| r.seconds)),
        ("peak_rss_mb", column(records, |r| r.memory.peak_rss_mb)),
        ("pss_mb", column(records, |r| r.memory.pss_mb)),
        (
            "private_dirty_mb",
            column(records, |r| r.memory.private_dirty_mb),
        ),
    ])
}

/// Run synthetic tasks on the fork engine (backend of `engine_selftest()`).
/// @keywords internal
/// @noRd
#[extendr]
#[allow(clippy::too_many_arguments)]
fn engine_selftest_rust(
    n_tasks: i32,
    workers: i32,
    tasks_per_child: i32,
    schedule: &str,
    payload: i32,
    sleep: f64,
    crash: Vec<i32>,
    hang: Vec<i32>,
    alloc_mb: Vec<f64>,
    timeout: f64,
    memory_limit_mb: Option<f64>,
    seed: f64,
    retries: i32,
) -> Result<List> {
    let options = pool_options(
        workers,
        tasks_per_child,
        schedule,
        timeout,
        memory_limit_mb,
        retries,
    )?;
    let n_tasks = usize::try_from(n_tasks).map_err(|_| input_error("`n_tasks` must be >= 0"))?;
    let payload = usize::try_from(payload).map_err(|_| input_error("`payload` must be >= 0"))?;
    let non_negative = |value: f64| value.is_finite() && value >= 0.0;
    if !(non_negative(sleep) && alloc_mb.iter().copied().all(non_negative)) {
        return Err(input_error(
            "`sleep` and `alloc_mb` must be finite and >= 0",
        ));
    }
    let task_numbers = |v: Vec<i32>| {
        v.into_iter()
            .filter_map(|t| usize::try_from(t).ok())
            .collect()
    };
    let tasks = selftest::SyntheticTasks {
        payload,
        sleep: Duration::from_secs_f64(sleep),
        alloc_mb,
        crash: task_numbers(crash),
        hang: task_numbers(hang),
        seed: seed as i64 as u64,
    };
    let numbers: Vec<usize> = (1..=n_tasks).collect();
    let records = engine::run_tasks(
        &numbers,
        &options,
        |c| tasks.run(c),
        user_interrupt_pending,
        |_| {},
    )
    .map_err(|e| input_error(e.to_string()))?;
    let checksum: Vec<Option<f64>> = records
        .iter()
        .map(|r| r.outcome.as_ref().ok().map(|v| v.iter().sum()))
        .collect();
    Ok(record_columns(&records, ("checksum", r!(checksum))))
}

fn index_column(values: Vec<i32>, name: &str) -> Result<Vec<usize>> {
    values
        .into_iter()
        .map(|v| usize::try_from(v).map_err(|_| input_error(format!("negative index in `{name}`"))))
        .collect()
}

fn decode_model(bytes: &Raw) -> Result<Model> {
    Model::from_bytes(bytes.as_slice()).map_err(input_error)
}

/// Build a model from coded token columns and return its bytes.
/// Levels are coded from 0; `factor_codes` holds one column per factor,
/// column-major; `time_series` is the 0-based factor index or -1.
/// @keywords internal
/// @noRd
#[extendr]
#[allow(clippy::too_many_arguments)]
fn model_build_rust(
    count: Vec<f64>,
    bin: Vec<i32>,
    context: Vec<i32>,
    species: Vec<i32>,
    ran: Vec<i32>,
    factor_codes: Vec<i32>,
    context_levels: Vec<String>,
    species_levels: Vec<String>,
    ran_levels: Vec<String>,
    factor_names: Vec<String>,
    factor_levels: List,
    time_series: i32,
    bins: i32,
    degrees: Vec<i32>,
    warp_precision: f64,
    buffer_factor: f64,
    max_penalty_at_distance_factor: f64,
    round_none: bool,
) -> Result<Raw> {
    let n = count.len();
    if factor_codes.len() != n * factor_names.len() || factor_levels.len() != factor_names.len() {
        return Err(input_error("fixed-effect codes do not match the factors"));
    }
    let mut factors = Vec::with_capacity(factor_names.len());
    for (f, (name, levels)) in factor_names.iter().zip(factor_levels.values()).enumerate() {
        let levels: Vec<String> = levels
            .as_string_vector()
            .ok_or_else(|| input_error(format!("levels of factor `{name}` must be strings")))?;
        factors.push(if f as i32 == time_series {
            Factor::time_series(name.clone(), levels)
        } else {
            Factor::new(name.clone(), levels)
        });
    }
    let design =
        Design::new(context_levels, species_levels, ran_levels, factors).map_err(input_error)?;
    let tokens = CodedTokens {
        count,
        bin,
        context: index_column(context, "context")?,
        species: index_column(species, "species")?,
        ran: index_column(ran, "ran")?,
        factor_levels: factor_codes
            .chunks(n.max(1))
            .take(factor_names.len())
            .map(|column| index_column(column.to_vec(), "fixed effects"))
            .collect::<Result<_>>()?,
    };
    let settings = Settings {
        warp_precision,
        buffer_factor,
        max_penalty_at_distance_factor,
    };
    let bins = usize::try_from(bins).map_err(|_| input_error("`bins` must be positive"))?;
    let degrees = index_column(degrees, "degrees")?;
    let model = model::build_model(design, bins, degrees, settings, round_none, &tokens)
        .map_err(input_error)?;
    Ok(Raw::from_bytes(&model.to_bytes().map_err(input_error)?))
}

/// Describe a model: parameters, treatments, weights, summed table, dispersion.
/// @keywords internal
/// @noRd
#[extendr]
fn model_describe_rust(bytes: Raw) -> Result<List> {
    let model = decode_model(&bytes)?;
    let design = model.design();
    let table = model.table();
    let shape = table.shape();
    let ran_blocks = table.ran_blocks();

    let roles = model.layout().roles();
    let role_column = |f: &dyn Fn(&ParameterRole) -> Option<String>| -> Vec<Option<String>> {
        roles.iter().map(f).collect()
    };
    let parameters = List::from_pairs(vec![
        ("name", r!(model.parameter_names())),
        (
            "role",
            r!(role_column(&|r| Some(match r {
                ParameterRole::Beta { treatment: 0, .. } => "baseline".into(),
                ParameterRole::Beta { .. } => "beta".into(),
                ParameterRole::Warp { .. } => "warp".into(),
            }))),
        ),
        (
            "component",
            r!(role_column(&|r| Some(match r {
                ParameterRole::Beta { component, .. } => component.name().into(),
                ParameterRole::Warp { kind, .. } => kind.name().into(),
            }))),
        ),
        (
            "context",
            r!(role_column(&|r| match r {
                ParameterRole::Beta { context, .. } => Some(design.contexts()[*context].clone()),
                ParameterRole::Warp { .. } => None,
            })),
        ),
        (
            "species",
            r!(role_column(&|r| match r {
                ParameterRole::Beta { species, .. } | ParameterRole::Warp { species, .. } => {
                    Some(design.species()[*species].clone())
                }
            })),
        ),
        (
            "block",
            r!(roles
                .iter()
                .map(|r| match r {
                    ParameterRole::Beta { block, .. } => Some(*block as i32 + 1),
                    ParameterRole::Warp { .. } => None,
                })
                .collect::<Vec<_>>()),
        ),
        (
            "treatment",
            r!(role_column(&|r| match r {
                ParameterRole::Beta { treatment, .. } => {
                    Some(design.treatments()[*treatment].name.clone())
                }
                ParameterRole::Warp { .. } => None,
            })),
        ),
        (
            "ran",
            r!(role_column(&|r| match r {
                ParameterRole::Warp { ran, .. } => Some(design.ran_levels()[*ran].clone()),
                ParameterRole::Beta { .. } => None,
            })),
        ),
    ]);

    let rows = table.row_count();
    let (mut ran, mut context, mut species, mut treatment, mut bin) = (
        Vec::with_capacity(rows),
        Vec::with_capacity(rows),
        Vec::with_capacity(rows),
        Vec::with_capacity(rows),
        Vec::with_capacity(rows),
    );
    let treatment_names = design.treatment_names();
    for block in 0..ran_blocks.count() {
        let ran_label = ran_blocks
            .real_of_block(block)
            .map_or("none", |r| design.ran_levels()[r].as_str());
        for c in 0..shape.contexts {
            for s in 0..shape.species {
                for treatment_name in &treatment_names {
                    for b in 1..=shape.bins {
                        ran.push(ran_label);
                        context.push(design.contexts()[c].as_str());
                        species.push(design.species()[s].as_str());
                        treatment.push(treatment_name.as_str());
                        bin.push(b as i32);
                    }
                }
            }
        }
    }
    let summed = List::from_pairs(vec![
        ("ran", r!(ran)),
        ("context", r!(context)),
        ("species", r!(species)),
        ("treatment", r!(treatment)),
        ("bin", r!(bin)),
        ("count", r!(table.count())),
        ("count_log", r!(table.count_log())),
        ("observed", r!(table.observed().to_vec())),
    ]);
    // For each factor, the level every treatment has.
    let treatment_levels =
        List::from_values(design.factors().iter().enumerate().map(|(f, factor)| {
            design
                .treatments()
                .iter()
                .map(|t| factor.levels[t.levels[f]].clone())
                .collect::<Vec<String>>()
        }));
    let factor_levels = List::from_values(design.factors().iter().map(|f| f.levels.clone()));
    let factor_names: Vec<String> = design.factors().iter().map(|f| f.name.clone()).collect();
    let time_series: Vec<String> = design
        .factors()
        .iter()
        .filter(|f| f.is_time_series)
        .map(|f| f.name.clone())
        .collect();
    Ok(list!(
        parameters = parameters,
        treatments = treatment_names.clone(),
        factor_names = factor_names,
        factor_levels = factor_levels,
        time_series = time_series,
        treatment_levels = treatment_levels,
        weights = design.weights().to_vec(),
        contexts = design.contexts().to_vec(),
        species = design.species().to_vec(),
        ran_levels = design.ran_levels().to_vec(),
        has_none = ran_blocks.has_population_block(),
        bins = shape.bins as i32,
        degrees = model
            .structure()
            .degrees()
            .iter()
            .map(|&d| d as i32)
            .collect::<Vec<_>>(),
        summed = summed,
        dispersion = table.dispersions().to_vec()
    ))
}

/// Objective value, parts, gradient and boundary distances at `x`, with the
/// barrier anchored at `start`.
/// @keywords internal
/// @noRd
#[extendr]
fn model_objective_rust(bytes: Raw, x: Vec<f64>, start: Vec<f64>) -> Result<List> {
    let model = decode_model(&bytes)?;
    let mut objective = Objective::new(&model);
    objective
        .set_penalty_coefficients(&start)
        .map_err(input_error)?;
    let mut gradient = vec![0.0; x.len()];
    let value = objective
        .value_and_gradient(&x, &mut gradient)
        .map_err(input_error)?;
    let nll = objective.nll(&x).map_err(input_error)?;
    let penalty = objective.penalty(&x).map_err(input_error)?;
    let distances = objective
        .boundary_distances(&x)
        .map_err(input_error)?
        .to_vec();
    Ok(list!(
        value = value,
        nll = nll,
        penalty = penalty,
        gradient = gradient,
        distances = distances
    ))
}

/// Predicted log rates (`pred.log`) for every summed row.
/// @keywords internal
/// @noRd
#[extendr]
fn model_predict_rust(bytes: Raw, x: Vec<f64>) -> Result<Vec<f64>> {
    let model = decode_model(&bytes)?;
    let mut predictions = vec![0.0; model.table().row_count()];
    Objective::new(&model)
        .predict_log(&x, &mut predictions)
        .map_err(input_error)?;
    Ok(predictions)
}

/// Whether `x` is feasible: every boundary distance positive and every
/// predicted log rate finite and at least -0.01.
/// @keywords internal
/// @noRd
#[extendr]
fn model_is_feasible_rust(bytes: Raw, x: Vec<f64>) -> Result<bool> {
    let model = decode_model(&bytes)?;
    let mut predictions = vec![0.0; model.table().row_count()];
    Objective::new(&model)
        .is_feasible(&x, &mut predictions)
        .map_err(input_error)
}

/// Fit a model (with its structure) from a given start.
/// @keywords internal
/// @noRd
#[extendr]
fn model_fit_rust(bytes: Raw, start: Vec<f64>, ctol: f64, max_evals: i32) -> Result<List> {
    let model = decode_model(&bytes)?;
    let settings = fit_settings(ctol, max_evals)?;
    let result = fit::fit(&model, &start, &settings).map_err(input_error)?;
    Ok(fit_list(&result))
}

/// Seconds per value-and-gradient evaluation, timed inside Rust over `repeats` calls.
/// @keywords internal
/// @noRd
#[extendr]
fn model_time_evaluation_rust(bytes: Raw, x: Vec<f64>, repeats: i32) -> Result<Vec<f64>> {
    let model = decode_model(&bytes)?;
    let mut objective = Objective::new(&model);
    objective
        .set_penalty_coefficients(&x)
        .map_err(input_error)?;
    let mut gradient = vec![0.0; x.len()];
    let mut seconds = Vec::new();
    for _ in 0..repeats.max(1) {
        let started = std::time::Instant::now();
        objective
            .value_and_gradient(&x, &mut gradient)
            .map_err(input_error)?;
        seconds.push(started.elapsed().as_secs_f64());
    }
    Ok(seconds)
}

fn detection_settings(
    window: f64,
    cutoff: f64,
    method: &str,
    buffer_factor: f64,
) -> Result<DetectionSettings> {
    let method = match method {
        "improved" => DetectionMethod::Improved,
        "original" => DetectionMethod::Original,
        other => return Err(input_error(format!("unknown LRO_method \"{other}\""))),
    };
    let settings = DetectionSettings {
        buffer_factor,
        lro_cutoff: cutoff,
        lro_window_factor: window,
        method,
    };
    settings.validate().map_err(input_error)?;
    Ok(settings)
}

fn fit_settings(ctol: f64, max_evals: i32) -> Result<FitSettings> {
    let settings = FitSettings {
        ctol,
        max_evals: usize::try_from(max_evals)
            .map_err(|_| input_error("`max_evals` must be positive"))?,
        ..FitSettings::default()
    };
    settings.validate().map_err(input_error)?;
    Ok(settings)
}

fn seed_value(seed: f64) -> Result<u64> {
    if seed.is_finite() && seed == seed.trunc() {
        Ok(seed as i64 as u64)
    } else {
        Err(input_error("the seed must be a whole number"))
    }
}

fn fit_list(result: &FitResult) -> List {
    list!(
        parameters = result.parameters.clone(),
        penalized_nll = result.penalized_nll,
        nll = result.nll,
        code = result.code.to_string(),
        converged = result.code.is_converged(),
        evaluations = result.evaluations as i32,
        seconds = result.seconds
    )
}

/// Detect the structure of a model's data, then fit it.
/// @keywords internal
/// @noRd
#[extendr]
#[allow(clippy::too_many_arguments)]
fn wisp_fit_rust(
    bytes: Raw,
    window: f64,
    cutoff: f64,
    method: &str,
    buffer_factor: f64,
    ctol: f64,
    max_evals: i32,
    seed: f64,
) -> Result<List> {
    let base = decode_model(&bytes)?;
    let detection = detection_settings(window, cutoff, method, buffer_factor)?;
    let settings = fit_settings(ctol, max_evals)?;
    let fitted = pipeline::detect_and_fit(&base, &detection, &settings, seed_value(seed)?)
        .map_err(input_error)?;
    let change_points =
        List::from_values(fitted.detected.change_points.iter().map(|per_treatment| {
            List::from_values(per_treatment.iter().map(|points| r!(points.clone())))
        }));
    let plan = BootstrapPlan {
        model: fitted.model.clone(),
        detected: fitted.detected.clone(),
        fit: settings,
    };
    Ok(list!(
        model = Raw::from_bytes(&fitted.model.to_bytes().map_err(input_error)?),
        plan = Raw::from_bytes(&plan.to_bytes().map_err(input_error)?),
        degrees = fitted
            .detected
            .structure
            .degrees()
            .iter()
            .map(|&d| d as i32)
            .collect::<Vec<_>>(),
        change_points = change_points,
        start = fitted.start.clone(),
        repair_attempts = fitted.repair.attempts as i32,
        fit = fit_list(&fitted.fit)
    ))
}

/// The LRO grid search: every (window factor, cutoff) pair detected, each
/// distinct structure fitted once in a forked child.
/// @keywords internal
/// @noRd
#[extendr]
#[allow(clippy::too_many_arguments)]
fn wisp_grid_search_rust(
    bytes: Raw,
    method: &str,
    buffer_factor: f64,
    ctol: f64,
    max_evals: i32,
    seed: f64,
    workers: i32,
) -> Result<List> {
    let base = decode_model(&bytes)?;
    let template = detection_settings(1.0, 1.0, method, buffer_factor)?;
    let settings = fit_settings(ctol, max_evals)?;
    let seed = seed_value(seed)?;
    let grid = pipeline::lro_grid();
    let (distinct, index_of_point) =
        pipeline::distinct_detections(&base, &grid, &template).map_err(input_error)?;
    let options = PoolOptions {
        workers: count_option(workers, "max.fork")?,
        ..PoolOptions::default()
    };
    let tasks: Vec<usize> = (1..=distinct.len()).collect();
    let records = engine::run_tasks(
        &tasks,
        &options,
        |context| {
            Ok(pipeline::grid_fit(
                &base,
                &distinct[context.task - 1],
                &settings,
                seed,
            ))
        },
        user_interrupt_pending,
        |_| {},
    )
    .map_err(|e| input_error(e.to_string()))?;
    let outcomes: Vec<pipeline::GridOutcome> = records
        .into_iter()
        .map(|r| {
            r.outcome
                .unwrap_or_else(|failure| pipeline::GridOutcome::failed(failure.to_string()))
        })
        .collect();
    let observations = base.table().observed_row_count();
    let at = |point: usize| &outcomes[index_of_point[point]];
    let n = grid.len();
    Ok(list!(
        LROwindow_factor = grid.iter().map(|g| g.0).collect::<Vec<_>>(),
        LROcutoff = grid.iter().map(|g| g.1).collect::<Vec<_>>(),
        neg_loglik = (0..n).map(|p| at(p).nll).collect::<Vec<_>>(),
        penalized_neg_loglik = (0..n).map(|p| at(p).penalized_nll).collect::<Vec<_>>(),
        code = (0..n).map(|p| at(p).code.clone()).collect::<Vec<_>>(),
        converged = (0..n).map(|p| at(p).converged).collect::<Vec<_>>(),
        n_params = (0..n).map(|p| at(p).parameters as i32).collect::<Vec<_>>(),
        AIC = (0..n).map(|p| at(p).aic()).collect::<Vec<_>>(),
        BIC = (0..n).map(|p| at(p).bic(observations)).collect::<Vec<_>>(),
        structure = index_of_point
            .iter()
            .map(|&i| i as i32 + 1)
            .collect::<Vec<_>>()
    ))
}

/// Test-only fault plan from a named list of replicate numbers.
fn fault_plan(faults: List) -> Result<faults::FaultPlan> {
    let mut plan = faults::FaultPlan::default();
    for (name, tasks) in faults.iter() {
        let fault = faults::Fault::from_name(name)
            .ok_or_else(|| input_error(format!("unknown fault \"{name}\"")))?;
        let tasks = tasks
            .as_integer_vector()
            .ok_or_else(|| input_error("fault tasks must be integers"))?;
        plan.add(
            fault,
            tasks.into_iter().filter_map(|t| usize::try_from(t).ok()),
        );
    }
    Ok(plan)
}

fn trim_heap() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: malloc_trim only returns free heap pages to the system.
    unsafe {
        libc::malloc_trim(0);
    }
}

/// The checkpoint entry of a replicate's final outcome.
fn checkpoint_entry(
    record: &TaskRecord<FitResult>,
    plan_hash: u64,
    seed: f64,
) -> checkpoint::Entry {
    checkpoint::Entry {
        plan_hash,
        seed,
        replicate: record.task as u32,
        fit: record
            .outcome
            .as_ref()
            .ok()
            .map(|fit| checkpoint::FitSummary {
                parameters: fit.parameters.clone(),
                penalized_nll: fit.penalized_nll,
                nll: fit.nll,
                code: fit.code.to_string(),
                converged: fit.code.is_converged(),
                evaluations: fit.evaluations as i32,
            }),
        reason: record.outcome.as_ref().err().map(Failure::to_string),
        seconds: Some(record.seconds).filter(|s| s.is_finite()),
        pid: Some(record.pid).filter(|&p| p > 0),
        peak_rss_mb: record.memory.peak_rss_mb,
        pss_mb: record.memory.pss_mb,
        private_dirty_mb: record.memory.private_dirty_mb,
    }
}

/// Bootstrap replicates on the fork engine. With a non-empty `checkpoint`
/// path (a file prepared by `checkpoint_open_rust`), the parent appends every
/// replicate's outcome to it, fsync'd, as it arrives. A Ctrl-C returns the
/// replicates finished so far with `interrupted = TRUE`.
/// @keywords internal
/// @noRd
#[extendr]
#[allow(clippy::too_many_arguments)]
fn bootstrap_fork_rust(
    plan: Raw,
    seed: f64,
    replicates: Vec<i32>,
    workers: i32,
    tasks_per_child: i32,
    schedule: &str,
    timeout: f64,
    memory_limit_mb: Option<f64>,
    trim_memory: bool,
    on_result: Robj,
    faults: List,
    checkpoint: &str,
) -> Result<List> {
    let plan_hash = checkpoint::fnv1a64(&[plan.as_slice()]);
    let plan = BootstrapPlan::from_bytes(plan.as_slice()).map_err(input_error)?;
    let faults = fault_plan(faults)?;
    let seed_number = seed;
    let seed = seed_value(seed)?;
    let options = pool_options(
        workers,
        tasks_per_child,
        schedule,
        timeout,
        memory_limit_mb,
        0,
    )?;
    let tasks = index_column(replicates, "replicates")?;
    let mut appender = if checkpoint.is_empty() {
        None
    } else {
        Some(
            checkpoint::Appender::new(std::path::Path::new(checkpoint))
                .map_err(|e| input_error(e.to_string()))?,
        )
    };
    let mut checkpoint_error: Option<String> = None;
    let mut finished: Vec<TaskRecord<FitResult>> = Vec::new();
    let callback = on_result.as_function();
    let outcome = engine::run_tasks(
        &tasks,
        &options,
        |context| {
            faults.strike(context.task);
            let result = bootstrap::run_replicate(&plan, seed, context.task);
            if trim_memory {
                trim_heap();
            }
            result
        },
        user_interrupt_pending,
        |record| {
            if let (Some(writer), None) = (appender.as_mut(), &checkpoint_error) {
                if let Err(e) = writer.append(&checkpoint_entry(record, plan_hash, seed_number)) {
                    checkpoint_error = Some(format!("replicate {}: {e}", record.task));
                }
            }
            finished.push(record.clone());
            if let Some(callback) = &callback {
                let _ = callback.call(pairlist!(record.task as i32, record.outcome.is_ok()));
            }
        },
    );
    let (records, interrupted) = match outcome {
        Ok(records) => {
            drop(finished);
            (records, false)
        }
        Err(PoolError::Interrupted) => {
            let mut by_task: std::collections::HashMap<usize, TaskRecord<FitResult>> =
                finished.into_iter().map(|r| (r.task, r)).collect();
            let records = tasks
                .iter()
                .map(|&task| {
                    by_task.remove(&task).unwrap_or(TaskRecord {
                        task,
                        attempts: 0,
                        outcome: Err(Failure::NoResult),
                        pid: 0,
                        seconds: f64::NAN,
                        memory: Default::default(),
                    })
                })
                .collect();
            (records, true)
        }
        Err(e) => return Err(input_error(e.to_string())),
    };
    let parameter_count = plan.model.parameter_count();
    let mut estimates = Vec::with_capacity(records.len() * parameter_count);
    for record in &records {
        match &record.outcome {
            Ok(result) => estimates.extend_from_slice(&result.parameters),
            Err(_) => estimates.extend(std::iter::repeat_n(f64::NAN, parameter_count)),
        }
    }
    fn per_fit<T>(
        records: &[TaskRecord<FitResult>],
        field: impl Fn(&FitResult) -> T,
    ) -> Vec<Option<T>> {
        records
            .iter()
            .map(|r| r.outcome.as_ref().ok().map(&field))
            .collect()
    }
    let fits = List::from_pairs(vec![
        ("pen.neg.value", r!(per_fit(&records, |f| f.penalized_nll))),
        ("neg.loglik", r!(per_fit(&records, |f| f.nll))),
        (
            "converged",
            r!(per_fit(&records, |f| f.code.is_converged())),
        ),
        ("code", r!(per_fit(&records, |f| f.code.to_string()))),
        ("num.evals", r!(per_fit(&records, |f| f.evaluations as i32))),
    ]);
    Ok(list!(
        records = record_columns(
            &records,
            ("fit_seconds", r!(per_fit(&records, |f| f.seconds)))
        ),
        fits = fits,
        estimates = estimates,
        parameter_count = parameter_count as i32,
        interrupted = interrupted,
        checkpoint_error = r!(checkpoint_error)
    ))
}

/// Checks a fit's serialised plan against its model bytes; returns the
/// plan's parameter names and its checkpoint fingerprint (hex).
/// @keywords internal
/// @noRd
#[extendr]
fn bootstrap_plan_check_rust(plan: Raw, model: Raw) -> Result<List> {
    let key = format!("{:016x}", checkpoint::fnv1a64(&[plan.as_slice()]));
    let decoded = BootstrapPlan::from_bytes(plan.as_slice()).map_err(input_error)?;
    let model_bytes = decoded.model.to_bytes().map_err(input_error)?;
    Ok(list!(
        parameter_names = decoded.model.parameter_names(),
        model_matches = model_bytes.as_slice() == model.as_slice(),
        key = key
    ))
}

fn checkpoint_path(path: &str) -> Result<&std::path::Path> {
    if path.is_empty() {
        return Err(input_error("the checkpoint path is empty"));
    }
    Ok(std::path::Path::new(path))
}

/// Opens (creating or repairing) a checkpoint file and returns its entries
/// as columns, `estimates` as a list (NULL for failed replicates), and the
/// damaged byte ranges that were found (and dropped).
/// @keywords internal
/// @noRd
#[extendr]
fn checkpoint_open_rust(path: &str) -> Result<List> {
    let contents =
        checkpoint::open(checkpoint_path(path)?).map_err(|e| input_error(e.to_string()))?;
    let entries = &contents.entries;
    fn column<E, U>(items: &[E], f: impl Fn(&E) -> U) -> Vec<U> {
        items.iter().map(f).collect()
    }
    let fit =
        |f: fn(&checkpoint::FitSummary) -> f64| column(entries, move |e| e.fit.as_ref().map(f));
    Ok(List::from_pairs(vec![
        ("existed", r!(contents.existed)),
        ("replicate", r!(column(entries, |e| e.replicate as i32))),
        (
            "key",
            r!(column(entries, |e| format!("{:016x}", e.plan_hash))),
        ),
        ("seed", r!(column(entries, |e| e.seed))),
        ("ok", r!(column(entries, |e| e.fit.is_some()))),
        ("reason", r!(column(entries, |e| e.reason.clone()))),
        ("pen.neg.value", r!(fit(|f| f.penalized_nll))),
        ("neg.loglik", r!(fit(|f| f.nll))),
        (
            "converged",
            r!(column(entries, |e| e.fit.as_ref().map(|f| f.converged))),
        ),
        (
            "code",
            r!(column(entries, |e| e.fit.as_ref().map(|f| f.code.clone()))),
        ),
        (
            "num.evals",
            r!(column(entries, |e| e.fit.as_ref().map(|f| f.evaluations))),
        ),
        ("seconds", r!(column(entries, |e| e.seconds))),
        ("pid", r!(column(entries, |e| e.pid))),
        ("peak_rss_mb", r!(column(entries, |e| e.peak_rss_mb))),
        ("pss_mb", r!(column(entries, |e| e.pss_mb))),
        (
            "private_dirty_mb",
            r!(column(entries, |e| e.private_dirty_mb)),
        ),
        (
            "estimates",
            List::from_values(entries.iter().map(|e| match &e.fit {
                Some(f) => r!(f.parameters.clone()),
                None => r!(NULL),
            }))
            .into(),
        ),
        (
            "damage_offset",
            r!(column(&contents.damage, |d| d.offset as f64)),
        ),
        (
            "damage_length",
            r!(column(&contents.damage, |d| d.length as f64)),
        ),
        ("damage_at_end", r!(column(&contents.damage, |d| d.at_end))),
    ]))
}

/// Appends one replicate's outcome to a checkpoint made by
/// `checkpoint_open_rust`, durably. `fit_values` is (pen.neg.value,
/// neg.loglik, num.evals); `process` is (seconds, pid, peak_rss_mb, pss_mb,
/// private_dirty_mb), NA for unknown. `ok = FALSE` ignores the fit arguments.
/// @keywords internal
/// @noRd
#[extendr]
#[allow(clippy::too_many_arguments)]
fn checkpoint_append_rust(
    path: &str,
    key: &str,
    seed: f64,
    replicate: i32,
    ok: bool,
    reason: &str,
    parameters: Vec<f64>,
    fit_values: Vec<f64>,
    code: &str,
    converged: bool,
    process: Vec<f64>,
) -> Result<()> {
    let plan_hash = u64::from_str_radix(key, 16).map_err(|_| input_error("bad checkpoint key"))?;
    let replicate = u32::try_from(replicate)
        .ok()
        .filter(|&r| r >= 1)
        .ok_or_else(|| input_error("replicate must be >= 1"))?;
    if fit_values.len() != 3 || process.len() != 5 {
        return Err(input_error("fit_values needs 3 values and process 5"));
    }
    let known = |v: f64| Some(v).filter(|v| !v.is_nan());
    let entry = checkpoint::Entry {
        plan_hash,
        seed,
        replicate,
        fit: ok.then(|| checkpoint::FitSummary {
            parameters,
            penalized_nll: fit_values[0],
            nll: fit_values[1],
            code: code.to_string(),
            converged,
            evaluations: fit_values[2] as i32,
        }),
        reason: (!ok).then(|| reason.to_string()),
        seconds: known(process[0]),
        pid: known(process[1]).map(|p| p as i32),
        peak_rss_mb: known(process[2]),
        pss_mb: known(process[3]),
        private_dirty_mb: known(process[4]),
    };
    checkpoint::Appender::new(checkpoint_path(path)?)
        .and_then(|mut appender| appender.append(&entry))
        .map_err(|e| input_error(e.to_string()))
}

/// One bootstrap replicate in this process (serial, mclapply and future paths).
/// @keywords internal
/// @noRd
#[extendr]
fn bootstrap_replicate_rust(
    plan: Raw,
    seed: f64,
    replicate: i32,
    trim_memory: bool,
) -> Result<List> {
    let plan = BootstrapPlan::from_bytes(plan.as_slice()).map_err(input_error)?;
    let replicate =
        usize::try_from(replicate).map_err(|_| input_error("replicate must be >= 1"))?;
    let started = std::time::Instant::now();
    let outcome = bootstrap::run_replicate(&plan, seed_value(seed)?, replicate);
    if trim_memory {
        trim_heap();
    }
    let seconds = started.elapsed().as_secs_f64();
    let memory = engine::procmem::snapshot_self();
    let common = list!(
        seconds = seconds,
        pid = std::process::id() as i32,
        peak_rss_mb = memory.peak_rss_mb,
        pss_mb = memory.pss_mb,
        private_dirty_mb = memory.private_dirty_mb
    );
    Ok(match outcome {
        Ok(result) => list!(
            ok = true,
            reason = r!(NULL),
            fit = fit_list(&result),
            process = common
        ),
        Err(message) => list!(
            ok = false,
            reason = format!("error: {message}"),
            fit = r!(NULL),
            process = common
        ),
    })
}

/// Type-7 quantile (R's default) of sorted, non-empty values.
fn sorted_quantile(sorted: &[f64], probability: f64) -> f64 {
    let position = (sorted.len() - 1) as f64 * probability;
    let below = position.floor() as usize;
    let above = (below + 1).min(sorted.len() - 1);
    sorted[below] + (position - below as f64) * (sorted[above] - sorted[below])
}

/// Per summed row, quantiles of the predicted log rate over parameter
/// samples (`samples`: one parameter vector after another).
/// @keywords internal
/// @noRd
#[extendr]
fn model_prediction_bands_rust(
    bytes: Raw,
    samples: Vec<f64>,
    probabilities: Vec<f64>,
) -> Result<List> {
    const MAX_BUFFERED: usize = 1 << 24; // predictions held at once (128 MB)
    let model = decode_model(&bytes)?;
    let parameters = model.parameter_count();
    if parameters == 0 || samples.len() % parameters != 0 {
        return Err(input_error("samples must hold whole parameter vectors"));
    }
    let sample_count = samples.len() / parameters;
    let rows = model.table().row_count();
    let mut bands = vec![vec![f64::NAN; rows]; probabilities.len()];
    if sample_count == 0 {
        return Ok(List::from_values(bands));
    }
    let chunk_rows = (MAX_BUFFERED / sample_count).clamp(1, rows);
    let mut objective = Objective::new(&model);
    let mut prediction = vec![0.0; rows];
    let mut buffer = vec![0.0; chunk_rows * sample_count];
    let mut row_values = vec![0.0; sample_count];
    for first in (0..rows).step_by(chunk_rows) {
        let last = (first + chunk_rows).min(rows);
        for (sample, x) in samples.chunks(parameters).enumerate() {
            objective
                .predict_log(x, &mut prediction)
                .map_err(input_error)?;
            for row in first..last {
                buffer[(row - first) * sample_count + sample] = prediction[row];
            }
        }
        for row in first..last {
            row_values.copy_from_slice(
                &buffer[(row - first) * sample_count..(row - first + 1) * sample_count],
            );
            row_values.sort_by(f64::total_cmp);
            for (band, &p) in bands.iter_mut().zip(&probabilities) {
                band[row] = sorted_quantile(&row_values, p);
            }
        }
    }
    Ok(List::from_values(bands))
}

extendr_module! {
    mod wispack;
    fn engine_selftest_rust;
    fn model_build_rust;
    fn model_describe_rust;
    fn model_objective_rust;
    fn model_predict_rust;
    fn model_is_feasible_rust;
    fn model_fit_rust;
    fn model_time_evaluation_rust;
    fn wisp_fit_rust;
    fn wisp_grid_search_rust;
    fn bootstrap_fork_rust;
    fn bootstrap_replicate_rust;
    fn bootstrap_plan_check_rust;
    fn checkpoint_open_rust;
    fn checkpoint_append_rust;
    fn model_prediction_bands_rust;
}
