//! Saved state: round trips, versions, and fuzzing of both layers (the
//! frame, caught by its checksum; the payload with the checksum recomputed,
//! caught by decoding and the model's invariants).

use super::*;
use crate::changepoint::detect_structure;
use crate::error::ErrorKind;
use crate::original::pipeline::with_structure;
use crate::original::synthetic::{build_case_from, strings, SplitMix};
use crate::resample::Resampling;
use std::panic::{catch_unwind, AssertUnwindSafe};

/// A small fitted-looking plan: one gene, two mice, a binary factor, the
/// structure detected from the data. `max_evals` keeps replicates quick.
fn small_plan(max_evals: usize) -> Plan {
    let case = build_case_from(
        &mut SplitMix(7),
        1,
        1,
        vec![1],
        vec![Factor::new("side", strings(&["left", "right"]))],
        2,
    );
    let detected =
        detect_structure(case.model.table(), case.model.design(), &Default::default()).unwrap();
    let model = with_structure(&case.model, detected.structure.clone()).unwrap();
    Plan::WarpedSigmoid(WarpedSigmoidPlan {
        model,
        detected,
        settings: PipelineSettings {
            start: StartSettings::default(),
            fit: FitSettings {
                max_evals,
                ..FitSettings::default()
            },
        },
    })
}

fn same_bits(a: &[f64], b: &[f64]) -> bool {
    a.len() == b.len() && a.iter().zip(b).all(|(x, y)| x.to_bits() == y.to_bits())
}

fn assert_same_model(a: &Model, b: &Model) {
    assert_eq!(a.parameter_names(), b.parameter_names());
    assert_eq!(a.design(), b.design());
    assert_eq!(a.structure(), b.structure());
    assert_eq!(a.settings(), b.settings());
    let (s, t) = (a.table(), b.table());
    assert!(same_bits(s.count(), t.count()));
    assert!(same_bits(s.count_log(), t.count_log()));
    assert!(same_bits(s.dispersions(), t.dispersions()));
    assert!(same_bits(s.token_counts(), t.token_counts()));
    assert_eq!(s.observed(), t.observed());
    assert_eq!(s.token_rows(), t.token_rows());
}

/// Runs replicate 1 of a decoded plan; a panic fails the test with `what`.
fn replicate_does_not_panic(plan: &Plan, what: &str) {
    let run = catch_unwind(AssertUnwindSafe(|| {
        plan.run_replicate(Resampling::Cells, 3, 1)
    }));
    assert!(run.is_ok(), "{what}: the replicate panicked");
}

#[test]
fn a_plan_round_trips_and_bootstraps_identically() {
    let plan = small_plan(1000);
    let bytes = encode_plan(&plan).unwrap();
    assert!(bytes.starts_with(MAGIC));
    let back = decode_plan(&bytes).unwrap();
    assert_same_model(plan.model(), back.model());
    let Plan::WarpedSigmoid(original) = &plan else {
        unreachable!("a warped-sigmoid plan")
    };
    let Plan::WarpedSigmoid(decoded) = &back else {
        unreachable!("a warped-sigmoid plan")
    };
    assert_eq!(original.detected, decoded.detected);
    assert_eq!(original.settings, decoded.settings);
    assert_eq!(encode_plan(&back).unwrap(), bytes);
    for replicate in 1..=3 {
        let a = plan
            .run_replicate(Resampling::Cells, 11, replicate)
            .unwrap();
        let b = back
            .run_replicate(Resampling::Cells, 11, replicate)
            .unwrap();
        assert!(
            same_bits(&a.parameters, &b.parameters),
            "replicate {replicate}"
        );
        assert_eq!(a.objective.to_bits(), b.objective.to_bits());
    }
}

#[test]
fn a_model_round_trips_and_is_not_taken_for_a_plan() {
    let plan = small_plan(1000);
    let bytes = encode_model(plan.model()).unwrap();
    assert_same_model(plan.model(), &decode_model(&bytes).unwrap());
    let error = decode_plan(&bytes).unwrap_err();
    assert_eq!(error.kind, ErrorKind::Input);
    // A plan's bytes give its model.
    let plan_bytes = encode_plan(&plan).unwrap();
    assert_same_model(plan.model(), &decode_model(&plan_bytes).unwrap());
}

#[test]
fn a_newer_format_is_refused_with_the_version_that_wrote_it() {
    let bytes = encode_plan(&small_plan(1000)).unwrap();
    let header = crate::codec::frame_header_bytes(MAGIC);
    let mut newer = bytes.clone();
    newer[header..header + 4].copy_from_slice(&(FORMAT + 1).to_le_bytes());
    let error = decode(&reseal(&newer).unwrap()).err().unwrap();
    assert_eq!(error.kind, ErrorKind::Input);
    assert!(error
        .message
        .contains(&format!("wispack {WRITER} in format {}", FORMAT + 1)));
    assert!(
        error.message.contains("update wispack"),
        "{}",
        error.message
    );
}

#[test]
fn the_checksum_catches_every_flipped_byte_and_every_truncation() {
    let bytes = encode_plan(&small_plan(1000)).unwrap();
    let mut rng = SplitMix(99);
    let mut cases = 0;
    for at in 0..bytes.len() {
        let mut damaged = bytes.clone();
        damaged[at] ^= 1 + rng.below(255) as u8;
        let error = decode(&damaged)
            .err()
            .expect("a flipped byte was not noticed");
        // The magic's first byte makes it look like an unframed (0.1.0) plan.
        assert_eq!(
            error.kind,
            ErrorKind::Corrupt,
            "byte {at}: {}",
            error.message
        );
        cases += 1;
    }
    for cut in 0..bytes.len() {
        let error = decode(&bytes[..cut])
            .err()
            .expect("a truncation was not noticed");
        assert_eq!(
            error.kind,
            ErrorKind::Corrupt,
            "cut {cut}: {}",
            error.message
        );
        cases += 1;
    }
    let mut longer = bytes.clone();
    longer.push(0);
    assert_eq!(decode(&longer).err().unwrap().kind, ErrorKind::Corrupt);
    assert!(cases > 2000, "{cases} cases");
}

#[test]
fn damaged_payloads_behind_a_valid_checksum_are_errors_or_valid_plans() {
    let bytes = encode_plan(&small_plan(15)).unwrap();
    let header = crate::codec::frame_header_bytes(MAGIC);
    let body = header + 6 + WRITER.len();
    let mut rng = SplitMix(2024);
    let (mut refused, mut valid) = (0, 0);
    for case in 0..2500 {
        let mut damaged = bytes.clone();
        let flips = 1 + rng.below(3);
        for _ in 0..flips {
            let at = header + rng.below(bytes.len() - header);
            damaged[at] ^= 1 + rng.below(255) as u8;
        }
        if case % 5 == 0 {
            // and sometimes cut short inside the payload
            damaged.truncate(header + rng.below(bytes.len() - header));
        }
        match decode(&reseal(&damaged).unwrap()) {
            Ok(Saved::Plan(plan)) => {
                valid += 1;
                replicate_does_not_panic(&plan, &format!("case {case}"));
            }
            Ok(Saved::Model(_)) => valid += 1,
            Err(error) => {
                refused += 1;
                let header_damaged = damaged[header..body.min(damaged.len())]
                    != bytes[header..body.min(damaged.len())];
                assert!(
                    error.kind == ErrorKind::Corrupt
                        || (header_damaged && error.kind == ErrorKind::Input),
                    "case {case}: {error:?}"
                );
            }
        }
    }
    eprintln!("{refused} refused, {valid} decoded to valid plans");
    assert!(
        refused > 1000 && valid > 10,
        "{refused} refused, {valid} valid"
    );
}

/// `fit$plan` of tests/testthat/fixtures/fit-v0.rds, saved by wispack 0.1.0
/// (kept in hex beside it).
fn plan_v0() -> Vec<u8> {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../tests/testthat/fixtures/fit-v0-plan.hex"
    );
    let hex: String = std::fs::read_to_string(path)
        .unwrap()
        .split_whitespace()
        .collect();
    (0..hex.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&hex[i..i + 2], 16).unwrap())
        .collect()
}

#[test]
fn plans_of_wispack_0_1_0_are_read() {
    let plan = decode_plan(&plan_v0()).unwrap();
    let model = plan.model();
    assert_eq!(model.parameter_count(), 14);
    assert_eq!(model.structure().degrees(), &[1]);
    let Plan::WarpedSigmoid(inner) = &plan else {
        unreachable!("a warped-sigmoid plan")
    };
    assert_eq!(inner.settings.start, StartSettings::default());
    assert_eq!(inner.settings.fit, FitSettings::default());
    assert!(plan.run_replicate(Resampling::Cells, 7, 1).is_ok());
    // Saved again, it is a format-1 state of the same model.
    let again = decode_plan(&encode_plan(&plan).unwrap()).unwrap();
    assert_same_model(model, again.model());
}

#[test]
fn damaged_plans_of_wispack_0_1_0_are_errors_or_valid_plans() {
    // No checksum protects these bytes: decoding and the invariants must.
    let bytes = plan_v0();
    let mut rng = SplitMix(5);
    let (mut refused, mut valid) = (0, 0);
    for case in 0..1500 {
        let mut damaged = bytes.clone();
        let at = rng.below(bytes.len());
        damaged[at] ^= 1 + rng.below(255) as u8;
        if case % 4 == 0 {
            damaged.truncate(rng.below(bytes.len()));
        }
        match decode_plan(&damaged) {
            Ok(mut plan) => {
                valid += 1;
                let Plan::WarpedSigmoid(inner) = &mut plan else {
                    unreachable!("a warped-sigmoid plan")
                };
                inner.settings.fit.max_evals = inner.settings.fit.max_evals.min(15);
                replicate_does_not_panic(&plan, &format!("case {case}"));
            }
            Err(error) => {
                refused += 1;
                assert_eq!(error.kind, ErrorKind::Corrupt, "case {case}: {error:?}");
            }
        }
    }
    eprintln!("{refused} refused, {valid} decoded to valid plans");
    assert!(
        refused > 500 && valid > 10,
        "{refused} refused, {valid} valid"
    );
}

/// A small count plan, fitted with a fixed dispersion when one is given.
fn count_plan(fixed_dispersion: Option<f64>) -> Plan {
    use crate::nb::pipeline::{fit_all, CountPlan};
    use crate::nb::settings::CountFitSettings;
    use crate::nb::tests_support::{simulate, Simulation};
    let (model, _) = simulate(&Simulation::default(), 8);
    let detected = crate::nb::start::detect_structure(
        &model,
        &crate::changepoint::DetectionSettings::default(),
    )
    .unwrap();
    let model = model.with_structure(detected.structure.clone()).unwrap();
    let settings = CountFitSettings {
        fixed_dispersion,
        ..CountFitSettings::default()
    };
    let estimate = fit_all(&model, Some(&detected), None, &settings).unwrap();
    Plan::Count(CountPlan {
        model,
        detected,
        settings,
        estimate,
    })
}

#[test]
fn a_count_plan_with_a_fixed_dispersion_is_format_2_and_keeps_it() {
    let header = crate::codec::frame_header_bytes(MAGIC);
    let format = |bytes: &[u8]| u32::from_le_bytes(bytes[header..header + 4].try_into().unwrap());
    // Without one: format 1, as before.
    let free = encode_plan(&count_plan(None)).unwrap();
    assert_eq!(format(&free), 1);
    let plan = count_plan(Some(0.0));
    let bytes = encode_plan(&plan).unwrap();
    assert_eq!(format(&bytes), 2);
    assert_eq!(format_of(&bytes), 2);
    let again = decode_plan(&bytes).unwrap();
    let (Plan::Count(a), Plan::Count(b)) = (&plan, &again) else {
        unreachable!("count plans")
    };
    assert_eq!(b.settings, a.settings);
    assert_eq!(b.settings.fixed_dispersion, Some(0.0));
    // Its replicates keep the dispersion held, bit for bit after the trip.
    let x = plan.run_replicate(Resampling::Parametric, 3, 1).unwrap();
    let y = again.run_replicate(Resampling::Parametric, 3, 1).unwrap();
    assert_eq!(x.parameters, y.parameters);
    // Format 2's extras are checked: a negative dispersion is damage.
    let mut damaged = bytes.clone();
    let end = damaged.len();
    // The extras end the payload: Some (1), the f64 of the dispersion, then
    // the held effects (none: a length of 0, one byte).
    assert_eq!(damaged[end - 1], 0);
    damaged[end - 9..end - 1].copy_from_slice(&(-1.0f64).to_le_bytes());
    let error = decode(&reseal(&damaged).unwrap()).err().unwrap();
    assert_eq!(error.kind, ErrorKind::Corrupt, "{}", error.message);
    assert!(
        error.message.contains("fixed dispersion"),
        "{}",
        error.message
    );
    // Format-1 bytes of a count plan read as before (no fixed dispersion).
    assert!(matches!(
        decode_plan(&free).unwrap(),
        Plan::Count(p) if p.settings.fixed_dispersion.is_none()
    ));
}

#[test]
fn a_reduced_count_plan_is_format_2_and_keeps_its_held_effects() {
    let header = crate::codec::frame_header_bytes(MAGIC);
    let format = |bytes: &[u8]| u32::from_le_bytes(bytes[header..header + 4].try_into().unwrap());
    let Plan::Count(mut plan) = count_plan(None) else {
        unreachable!("a count plan")
    };
    plan.model = plan.model.clone().with_held_effects(vec![1]).unwrap();
    let plan = Plan::Count(plan);
    let bytes = encode_plan(&plan).unwrap();
    assert_eq!(format(&bytes), 2);
    let again = decode_plan(&bytes).unwrap();
    let Plan::Count(decoded) = &again else {
        unreachable!("a count plan")
    };
    assert_eq!(decoded.model.held_effects(), &[1]);
    let x = plan.run_replicate(Resampling::Parametric, 3, 1).unwrap();
    let y = again.run_replicate(Resampling::Parametric, 3, 1).unwrap();
    assert_eq!(x.parameters, y.parameters);
    // A held effect that the design does not have is damage.
    let mut damaged = bytes.clone();
    let end = damaged.len();
    assert_eq!(&damaged[end - 2..], &[1, 1]);
    damaged[end - 1] = 9;
    let error = decode(&reseal(&damaged).unwrap()).err().unwrap();
    assert_eq!(error.kind, ErrorKind::Corrupt, "{}", error.message);
    assert!(
        error.message.contains("cannot be held"),
        "{}",
        error.message
    );
}

#[test]
fn a_count_plan_of_a_binned_table_is_format_3_and_keeps_its_exposures() {
    use crate::nb::CountModel;
    let header = crate::codec::frame_header_bytes(MAGIC);
    let format = |bytes: &[u8]| u32::from_le_bytes(bytes[header..header + 4].try_into().unwrap());
    let Plan::Count(mut plan) = count_plan(None) else {
        unreachable!("a count plan")
    };
    let model = &plan.model;
    let binned = model.table().as_binned();
    assert_eq!(binned.observed(), model.table().observed());
    let observed = |values: &[f64]| -> Vec<f64> {
        values
            .iter()
            .zip(binned.observed())
            .filter(|(_, &o)| o)
            .map(|(v, _)| *v)
            .collect()
    };
    for s in 0..model.table().shape().species {
        let table = model.table();
        assert!(same_bits(
            &observed(binned.counts(s)),
            &observed(table.counts(s))
        ));
        assert!(same_bits(
            &observed(binned.exposures(s)),
            &observed(table.exposures(s))
        ));
    }
    plan.model = CountModel::new(
        binned,
        model.design().clone(),
        model.structure().clone(),
        model.point_gap(),
    )
    .unwrap();
    let plan = Plan::Count(plan);
    let bytes = encode_plan(&plan).unwrap();
    assert_eq!(format(&bytes), 3);
    let again = decode_plan(&bytes).unwrap();
    let (Plan::Count(a), Plan::Count(b)) = (&plan, &again) else {
        unreachable!("count plans")
    };
    assert!(same_bits(
        a.model.table().token_exposures(),
        b.model.table().token_exposures()
    ));
    let x = plan.run_replicate(Resampling::Parametric, 3, 1).unwrap();
    let y = again.run_replicate(Resampling::Parametric, 3, 1).unwrap();
    assert_eq!(x.parameters, y.parameters);
    // A binned table has no cells to redraw.
    let error = plan
        .run_replicate(Resampling::Cells, 3, 1)
        .expect_err("resample = \"cells\" is refused");
    assert!(error.contains("only their"), "{error}");
    // A zero exposure behind a valid checksum is damage: the last f64.
    let mut damaged = bytes.clone();
    let end = damaged.len();
    damaged[end - 8..].copy_from_slice(&0.0f64.to_le_bytes());
    let error = decode(&reseal(&damaged).unwrap()).err().unwrap();
    assert_eq!(error.kind, ErrorKind::Corrupt, "{}", error.message);
}

/// The original model survives encoding with its objective unchanged.
#[test]
fn serialisation_round_trip_keeps_the_objective_identical() {
    use crate::original::synthetic::{build_case, perturbed, Factors};
    use crate::original::Objective;
    let case = build_case(61, Factors::BinaryAndTimeSeries, 4);
    let bytes = encode_model(&case.model).unwrap();
    let restored = decode_model(&bytes).unwrap();
    assert_eq!(restored.parameter_names(), case.model.parameter_names());

    let x = perturbed(&case.truth, 61);
    let mut original = Objective::new(&case.model);
    let mut copy = Objective::new(&restored);
    original.set_penalty_coefficients(&case.truth).unwrap();
    copy.set_penalty_coefficients(&case.truth).unwrap();
    let mut gradient = vec![0.0; x.len()];
    let mut copy_gradient = vec![0.0; x.len()];
    let value = original.value_and_gradient(&x, &mut gradient).unwrap();
    let copy_value = copy.value_and_gradient(&x, &mut copy_gradient).unwrap();
    assert_eq!(value.to_bits(), copy_value.to_bits());
    assert_eq!(gradient, copy_gradient);

    assert!(decode_model(&bytes[..bytes.len() / 2]).is_err());
}
