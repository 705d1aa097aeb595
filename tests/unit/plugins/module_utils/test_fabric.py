# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""nvidia-smi -q Fabric parsing and the tray verdict.

Samples: tests/unit/samples/smi/.  fabric_gb200_issue626_grep.txt and fabric_580.159.04_in_progress.txt
are verbatim QUOTED SAMPLE blocks of the reference (section 6); the smi_q_* files are full
``nvidia-smi -q`` outputs built around such blocks following the reference's value vocabularies.
"""
from __future__ import annotations

import functools

import pytest

from ansible_collections.rackscale.imex.plugins.module_utils import _fabric
from ansible_collections.rackscale.imex.tests.unit.plugins.vendor_samples import read_sample

BUS_IDS = ['00000008:01:00.0', '00000009:01:00.0', '00000018:01:00.0', '00000019:01:00.0']
UUID = '5f0a8c2e-1b3d-4e6f-8a9b-0c1d2e3f4a5b'
sample = functools.partial(read_sample, 'smi')


def fabric_block(name):
    """The Fabric section of a sample that holds only that section (as grep printed it)."""
    return _fabric._fabric_from_lines([line.expandtabs() for line in sample(name).splitlines()])


def tray(name):
    return _fabric.summarise_tray(_fabric.parse_smi_query(sample(name)))


def test_verbatim_issue_626_block():
    block = fabric_block('fabric_gb200_issue626_grep.txt')
    assert block == {
        'State': 'Completed', 'Status': 'Success', 'CliqueId': '2',
        'ClusterUUID': 'dc6e40c4-d722-4357-9ba6-5291dd461278',
        'Health': {'Summary': 'Unhealthy', 'Bandwidth': 'Full'},
    }


def test_verbatim_in_progress_block_with_partition_field():
    block = fabric_block('fabric_580.159.04_in_progress.txt')
    assert block['State'] == 'In Progress'
    assert block['Status'] == 'N/A'
    assert block['Health']['Partition Assigned'] == 'N/A'
    assert block['Health']['Route Recovery in progress'] == 'N/A'
    assert len(block['Health']) == 7


def test_parse_smi_query_splits_gpus_and_ignores_other_sections():
    gpus = _fabric.parse_smi_query(sample('smi_q_580.173.02_gb200_completed.txt'))
    assert [gpu['bus_id'] for gpu in gpus] == BUS_IDS
    assert [gpu['index'] for gpu in gpus] == [0, 1, 2, 3]
    # "GPU Fabric GUID" under Platform Info is not the Fabric section; Clocks after it is not part of it
    assert set(gpus[0]['fabric']) == {'State', 'Status', 'CliqueId', 'ClusterUUID', 'Health'}


def test_completed_tray_is_ok():
    result = tray('smi_q_580.173.02_gb200_completed.txt')
    assert result['fabric_ok'] is True
    assert result['problems'] == [] and result['warnings'] == []
    assert result['cluster_uuid'] == UUID
    assert result['clique_id'] == 32766
    assert result['gpus'][2] == {'index': 2, 'bus_id': '00000018:01:00.0', 'state': 'Completed', 'status': 'Success',
                                 'clique_id': 32766, 'cluster_uuid': UUID, 'health': 'Healthy'}


def test_in_progress_registration():
    result = tray('smi_q_580.159.04_in_progress.txt')
    assert result['fabric_ok'] is False
    assert result['cluster_uuid'] is None and result['clique_id'] is None
    assert result['problems'] == [
        'GPUs 0-3: fabric state is In Progress, not Completed (the GPU has not finished registering with the '
        'NVLink fabric; wait, or check the NVLink fabric manager / NMX)']
    assert result['gpus'][0]['status'] is None and result['gpus'][0]['health'] is None


def test_insufficient_resources_zero_clique_zero_uuid():
    result = tray('smi_q_580.95.09_insufficient_resources.txt')
    assert result['fabric_ok'] is False
    assert result['cluster_uuid'] is None and result['clique_id'] is None
    assert len(result['problems']) == 1
    problem = result['problems'][0]
    assert problem.startswith('GPUs 0-3: fabric status is Insufficient Resources, not Success')
    assert 'CliqueId is 0 (no NVLink partition assigned)' in problem
    assert 'ClusterUUID is 00000000-0000-0000-0000-000000000000 (the GPU is in no NVLink domain)' in problem


def test_gpus_disagree_on_clique():
    result = tray('smi_q_580.95.09_clique_disagree.txt')
    assert result['fabric_ok'] is False
    assert result['cluster_uuid'] == UUID
    assert result['clique_id'] is None
    assert result['problems'] == [
        'GPUs disagree on CliqueId: 32766 on GPUs 0-2, 2 on GPU 3 (all GPUs of a tray must be in one NVLink '
        'partition; after a partition change GPUs keep the old clique until reset)']


def test_non_mnnvl_gpu():
    result = tray('smi_q_non_mnnvl_na.txt')
    assert result['fabric_ok'] is False
    assert result['problems'][0].startswith('GPUs 0-3: fabric state is N/A (not an NVLink multi-node GPU')


def test_driver_without_fabric_section():
    result = tray('smi_q_no_fabric_section.txt')
    assert result['fabric_ok'] is False
    assert result['problems'][0].startswith('GPUs 0-3: no Fabric section in nvidia-smi -q')
    assert result['gpus'][0]['state'] is None


def test_unhealthy_summary_is_a_warning_not_a_problem():
    result = tray('smi_q_580.65.06_unhealthy_summary.txt')
    assert result['fabric_ok'] is True
    assert result['clique_id'] == 2
    assert result['gpus'][0]['health'] == 'Unhealthy'
    assert result['warnings'] == [
        'GPUs 0-3: fabric health is Unhealthy (Bandwidth: Full, Route Recovery in progress: False, '
        'Route Unhealthy: False, Access Timeout Recovery: False, Incorrect Configuration: None)']


def test_one_gpu_behind_names_its_bus_id():
    text = sample('smi_q_580.173.02_gb200_completed.txt')
    head, separator, tail = text.partition('GPU 00000019:01:00.0')
    tail = tail.replace('State                                          : Completed',
                        'State                                          : Not Started', 1)
    result = _fabric.summarise_tray(_fabric.parse_smi_query(head + separator + tail))
    assert result['fabric_ok'] is False
    assert result['problems'] == [
        'GPU 3 (00000019:01:00.0): fabric state is Not Started, not Completed (the GPU has not finished '
        'registering with the NVLink fabric; wait, or check the NVLink fabric manager / NMX)']
    # not every GPU agrees on a valid value any more
    assert result['cluster_uuid'] is None


def test_tabs_and_field_spelling_drift():
    text = ('GPU 00000008:01:00.0\n\tFabric\n\t\tState : Completed\n\t\tStatus : Success\n'
            '\t\tClique Id : 7\n\t\tCluster UUID : %s\n\t\tHealth : N/A\n\tProcesses : None\n' % UUID)
    result = _fabric.summarise_tray(_fabric.parse_smi_query(text))
    assert result['fabric_ok'] is True
    assert result['clique_id'] == 7
    assert result['cluster_uuid'] == UUID
    assert result['gpus'][0]['health'] is None


@pytest.mark.parametrize('text', ['', 'NVIDIA-SMI has failed because it couldn\'t communicate with the NVIDIA driver.\n',
                                  sample('fabric_gb200_issue626_grep.txt')])
def test_output_without_gpu_sections_raises(text):
    with pytest.raises(_fabric.SmiParseError) as caught:
        _fabric.parse_smi_query(text)
    assert caught.value.raw == text


def test_no_gpus_is_a_problem():
    result = _fabric.summarise_tray([])
    assert result['fabric_ok'] is False
    assert result['problems'] == ['nvidia-smi lists no GPUs']


@pytest.mark.parametrize('value, zero', [
    ('00000000-0000-0000-0000-000000000000', True), (UUID, False), (None, False)])
def test_is_zero_uuid(value, zero):
    assert _fabric.is_zero_uuid(value) is zero


def test_non_numeric_clique_is_kept_verbatim():
    text = ('GPU 00000008:01:00.0\n    Fabric\n        State : Completed\n        Status : Success\n'
            '        CliqueId : 0x7ffe\n        ClusterUUID : %s\n' % UUID)
    result = _fabric.summarise_tray(_fabric.parse_smi_query(text))
    assert result['clique_id'] == '0x7ffe'
    assert result['fabric_ok'] is True


def test_driver_version_is_read_from_the_query():
    assert _fabric.parse_driver_version(sample('smi_q_580.173.02_gb200_completed.txt')) == '580.173.02'
    assert _fabric.parse_driver_version(sample('smi_q_580.159.04_in_progress.txt')) == '580.159.04'
    assert _fabric.parse_driver_version('GPU 00000000:01:00.0\n') is None
